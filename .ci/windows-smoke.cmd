@echo off
rem The Windows smoke suite of issue 37, run by .ci/windows under wine:
rem   windows-smoke.cmd SGARD.EXE SCRATCH-FOLDER [SERVER-ADDRESS SSH-KEY]
rem One repository in a shared folder (a USB stick), two profiles (two
rem machines): init, add, checkpoint, status, history, encryption, a
rem restore into the second profile (which runs a --run once script, once),
rem and undo there. With a server (a
rem Linux sgardd on loopback) and a key it authorizes: a push from the
rem first profile and a pull into a third, new repository. Every step
rem that fails ends the suite with its name; "smoke: ok" at the end.
setlocal EnableExtensions
set "SG=%~1"
set "ROOT=%~2"
set "REPO=%ROOT%\repo"
set "H1=%ROOT%\h1"
set "H2=%ROOT%\h2"
set "H3=%ROOT%\h3"
set "ADDR=%~3"
set "KEY=%~4"
set "SSH_AUTH_SOCK="
set "SGARD_NOW=2026-12-01T10:00:00Z"
set "SGARD_PASSPHRASE=correct horse battery staple"
set "XDG_STATE_HOME="
set "XDG_CACHE_HOME="
set "XDG_CONFIG_HOME="
mkdir "%H1%\.config\app"
mkdir "%H2%"
mkdir "%H3%"
if not exist "%H1%\.config\app\" goto :fail_setup
if not exist "%H2%\" goto :fail_setup

rem --- machine one
set "USERPROFILE=%H1%"
set "SGARD_HOSTNAME=one"
> "%H1%\.bashrc" echo export EDITOR=vim
> "%H1%\.config\app\conf.toml" echo answer = 42
> "%H1%\.netrc" echo machine example.com password hunter2
call :run init --repo "%REPO%"
if errorlevel 1 goto :fail
call :run encrypt init --repo "%REPO%"
if errorlevel 1 goto :fail
call :run add --repo "%REPO%" "%H1%\.bashrc" "%H1%\.config\app"
if errorlevel 1 goto :fail
call :run add --repo "%REPO%" --encrypt "%H1%\.netrc"
if errorlevel 1 goto :fail
rem A script for machine two (see "scripts" below): a .cmd is recorded
rem executable by its extension, and runs through cmd.exe.
> "%H1%\setup.cmd" echo @echo ran^> script-ran.txt
call :run add --repo "%REPO%" --run once "%H1%\setup.cmd"
if errorlevel 1 goto :fail
call :run checkpoint --repo "%REPO%" -m one
if errorlevel 1 goto :fail
call :run status --repo "%REPO%"
if errorlevel 1 goto :fail
set "SGARD_NOW=2026-12-01T10:05:00Z"
> "%H1%\.bashrc" echo export EDITOR=nvim
call :run checkpoint --repo "%REPO%" -m two
if errorlevel 1 goto :fail
call :run log --repo "%REPO%"
if errorlevel 1 goto :fail
call :run verify --repo "%REPO%"
if errorlevel 1 goto :fail

rem --- machine two: the same repository, another profile
set "USERPROFILE=%H2%"
set "SGARD_HOSTNAME=two"
rem Here the passphrase comes from a command, which runs through %COMSPEC%.
set "SGARD_PASSPHRASE="
set "SGARD_PASSPHRASE_COMMAND=echo correct horse battery staple"
call :run restore --repo "%REPO%"
if errorlevel 1 goto :fail
set "STEP=restored .bashrc differs"
fc /b "%H1%\.bashrc" "%H2%\.bashrc" >nul
if errorlevel 1 goto :fail
set "STEP=restored conf.toml differs"
fc /b "%H1%\.config\app\conf.toml" "%H2%\.config\app\conf.toml" >nul
if errorlevel 1 goto :fail
set "STEP=restored (decrypted) .netrc differs"
fc /b "%H1%\.netrc" "%H2%\.netrc" >nul
if errorlevel 1 goto :fail
call :run status --repo "%REPO%"
if errorlevel 1 goto :fail

rem --- scripts: the .cmd added with --run once ran at that restore (in the
rem home), and does not run again at the next one.
set "STEP=the --run once script did not run at restore"
if not exist "%H2%\script-ran.txt" goto :fail
del "%H2%\script-ran.txt"
call :run restore --repo "%REPO%"
if errorlevel 1 goto :fail
set "STEP=the --run once script ran again"
if exist "%H2%\script-ran.txt" goto :fail

rem An older version back, then undone.
call :run restore --repo "%REPO%" --at @~1 -f "%H2%\.bashrc"
if errorlevel 1 goto :fail
set "STEP=restore --at did not bring the first version"
findstr /c:"EDITOR=vim" "%H2%\.bashrc" >nul
if errorlevel 1 goto :fail
call :run undo --repo "%REPO%" --yes
if errorlevel 1 goto :fail
set "STEP=undo did not bring the second version back"
findstr /c:"EDITOR=nvim" "%H2%\.bashrc" >nul
if errorlevel 1 goto :fail

rem --- names that fold: Windows ignores case. A repository made where
rem names do not fold (the hook says so for profile one) may track
rem ~/.Xresources and ~/.xresources; restoring both here is refused.
set "USERPROFILE=%H1%"
set "SGARD_HOSTNAME=one"
> "%H1%\.Xresources" echo XTerm*faceName: mono
set "SGARD_TEST_FOLDING=none"
call :run add --repo "%REPO%" "%H1%\.Xresources" "%H1%\.xresources"
if errorlevel 1 goto :fail
set "SGARD_TEST_FOLDING="
set "USERPROFILE=%H2%"
set "SGARD_HOSTNAME=two"
set "STEP=restore of two names for one file here was not refused (exit 4)"
"%SG%" restore --repo "%REPO%" -f "%H2%\.xresources"
if not "%ERRORLEVEL%"=="4" goto :fail
if exist "%H2%\.xresources" goto :fail
set "USERPROFILE=%H1%"
set "SGARD_HOSTNAME=one"
call :run remove --repo "%REPO%" "%H1%\.xresources"
if errorlevel 1 goto :fail

rem --- doctor names what sgard does differently here
set "STEP=doctor does not name the Windows specifics"
"%SG%" doctor --repo "%REPO%" > "%ROOT%\doctor.txt" 2>&1
type "%ROOT%\doctor.txt"
findstr /c:"only the read-only attribute" "%ROOT%\doctor.txt" >nul
if errorlevel 1 goto :fail
findstr /c:"ignores case" "%ROOT%\doctor.txt" >nul
if errorlevel 1 goto :fail

rem --- tracked symlinks where Windows refuses them (SGARD_TEST_NO_SYMLINKS
rem acts out the refusal; wine 8 makes no symlink at all: its
rem CreateSymbolicLinkW says yes and does nothing, and it has no junctions).
rem Wine cannot make the links to add, so machine one's repository gets the
rem two link entries a Linux machine's `add` writes, as a git pull would
rem bring them: ~/.vimrc -> dot/vimrc (a file), ~/.config/nvim ->
rem ../dot/nvim (a folder); its next checkpoint records them.
set "LREPO=%ROOT%\linkrepo"
set "H4=%ROOT%\h4"
set "USERPROFILE=%H1%"
set "SGARD_HOSTNAME=one"
set "SGARD_PASSPHRASE_COMMAND="
mkdir "%H1%\dot\nvim"
mkdir "%H4%"
> "%H1%\dot\vimrc" echo set number
> "%H1%\dot\nvim\init.lua" echo vim.opt.number = true
call :run init --repo "%LREPO%"
if errorlevel 1 goto :fail
call :run add --repo "%LREPO%" "%H1%\dot"
if errorlevel 1 goto :fail
set "STEP=writing the link entries"
>> "%LREPO%\manifest.yaml" echo     - path: ~/.vimrc
>> "%LREPO%\manifest.yaml" echo       type: link
>> "%LREPO%\manifest.yaml" echo       target: dot/vimrc
>> "%LREPO%\manifest.yaml" echo       updated: 2026-12-01T10:00:00Z
>> "%LREPO%\manifest.yaml" echo     - path: ~/.config/nvim
>> "%LREPO%\manifest.yaml" echo       type: link
>> "%LREPO%\manifest.yaml" echo       target: ../dot/nvim
>> "%LREPO%\manifest.yaml" echo       updated: 2026-12-01T10:00:00Z
call :run checkpoint --repo "%LREPO%" -m links
if errorlevel 1 goto :fail
rem Machine four restores with symlinks refused: the link to a file becomes
rem a copy of it (made after the file itself is restored), the link to a
rem folder a junction where the file system has them (not under wine: then
rem it is skipped), each said in a warning.
set "USERPROFILE=%H4%"
set "SGARD_HOSTNAME=four"
set "SGARD_TEST_NO_SYMLINKS=1"
set "STEP=sgard restore --repo %LREPO% (links refused)"
echo ^> sgard restore --repo "%LREPO%" (links refused)
"%SG%" restore --repo "%LREPO%" 2> "%ROOT%\links.err"
if not "%ERRORLEVEL%"=="0" goto :fail_links
type "%ROOT%\links.err"
set "STEP=restore said nothing of the copy standing in for ~/.vimrc"
findstr /c:"~/.vimrc: wrote a copy of" "%ROOT%\links.err" >nul
if errorlevel 1 goto :fail
set "STEP=restore did not point at Developer Mode"
findstr /c:"Developer Mode" "%ROOT%\links.err" >nul
if errorlevel 1 goto :fail
set "STEP=restore said nothing of ~/.config/nvim"
findstr /c:"~/.config/nvim: " "%ROOT%\links.err" >nul
if errorlevel 1 goto :fail
set "STEP=the copy standing in for ~/.vimrc differs from its target"
fc /b "%H4%\dot\vimrc" "%H4%\.vimrc" >nul
if errorlevel 1 goto :fail
rem The copy is the link as long as it matches: ok, and nothing to record.
call :run status --repo "%LREPO%"
if errorlevel 1 goto :fail
call :run status --repo "%LREPO%" --exit-code "%H4%\.vimrc" "%H4%\dot"
if errorlevel 1 goto :fail
set "STEP=sgard checkpoint --repo %LREPO% (nothing to record)"
echo ^> sgard checkpoint --repo "%LREPO%"
"%SG%" checkpoint --repo "%LREPO%" -m nothing > "%ROOT%\links.out"
if not "%ERRORLEVEL%"=="0" goto :fail_links
type "%ROOT%\links.out"
findstr /c:"nothing changed since snapshot" "%ROOT%\links.out" >nul
if errorlevel 1 goto :fail
rem An edited copy no longer stands in: a type change, said why, never
rem recorded; restore -f copies the target again.
>> "%H4%\.vimrc" echo set list
set "STEP=status takes an edited copy for the link"
"%SG%" status --repo "%LREPO%" --exit-code "%H4%\.vimrc" > "%ROOT%\links.out"
if not errorlevel 1 goto :fail
type "%ROOT%\links.out"
findstr /c:"typechange" "%ROOT%\links.out" >nul
if errorlevel 1 goto :fail
call :run restore --repo "%LREPO%" -f "%H4%\.vimrc"
if errorlevel 1 goto :fail
set "STEP=restore -f did not copy the target again"
fc /b "%H4%\dot\vimrc" "%H4%\.vimrc" >nul
if errorlevel 1 goto :fail
set "SGARD_TEST_NO_SYMLINKS="

if "%ADDR%"=="" goto :done
rem --- the sync server: push from machine one, pull into a new repository
set "USERPROFILE=%H1%"
set "SGARD_HOSTNAME=one"
set "SGARD_PASSPHRASE_COMMAND="
set "SGARD_PASSPHRASE=correct horse battery staple"
call :run push --repo "%REPO%" -r %ADDR% --ssh-key "%KEY%"
if errorlevel 1 goto :fail
set "USERPROFILE=%H3%"
set "SGARD_HOSTNAME=three"
call :run pull --repo "%ROOT%\repo3" -r %ADDR% --ssh-key "%KEY%"
if errorlevel 1 goto :fail
set "STEP=pulled .bashrc differs"
fc /b "%H1%\.bashrc" "%H3%\.bashrc" >nul
if errorlevel 1 goto :fail
set "STEP=pulled (decrypted) .netrc differs"
fc /b "%H1%\.netrc" "%H3%\.netrc" >nul
if errorlevel 1 goto :fail
call :run status --repo "%ROOT%\repo3"
if errorlevel 1 goto :fail

:done
echo smoke: ok
exit /b 0

:run
set "STEP=sgard %*"
echo ^> sgard %*
"%SG%" %*
rem Any exit but 0: a crash's code (0xC0000409 and the like) is negative,
rem which `if errorlevel 1` would take for success.
if not "%ERRORLEVEL%"=="0" exit /b 1
exit /b 0

:fail_links
type "%ROOT%\links.err" 2>nul
goto :fail

:fail_setup
set "STEP=making the profiles"
:fail
echo smoke: FAILED at: %STEP%
exit /b 1
