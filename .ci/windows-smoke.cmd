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

:fail_setup
set "STEP=making the profiles"
:fail
echo smoke: FAILED at: %STEP%
exit /b 1
