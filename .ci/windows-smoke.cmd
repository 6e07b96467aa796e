@echo off
rem The Windows smoke suite of issue 37, run by .ci/windows under wine:
rem   windows-smoke.cmd SGARD.EXE SCRATCH-FOLDER
rem One repository in a shared folder (a USB stick), two profiles (two
rem machines): init, add, checkpoint, status, history, encryption, a
rem restore into the second profile, and undo there. Every step that
rem fails ends the suite with its name; "smoke: ok" at the end.
setlocal EnableExtensions
set "SG=%~1"
set "ROOT=%~2"
set "REPO=%ROOT%\repo"
set "H1=%ROOT%\h1"
set "H2=%ROOT%\h2"
set "SGARD_NOW=2026-12-01T10:00:00Z"
set "SGARD_PASSPHRASE=correct horse battery staple"
set "XDG_STATE_HOME="
set "XDG_CACHE_HOME="
set "XDG_CONFIG_HOME="
mkdir "%H1%\.config\app"
mkdir "%H2%"
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

echo smoke: ok
exit /b 0

:run
set "STEP=sgard %*"
echo ^> sgard %*
"%SG%" %*
if errorlevel 1 exit /b 1
exit /b 0

:fail_setup
set "STEP=making the profiles"
:fail
echo smoke: FAILED at: %STEP%
exit /b 1
