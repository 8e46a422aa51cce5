@echo off
rem Ternit Lab on Windows:  lab run   (opens the window)   lab test   (runs the tests)
rem The first call sets up .venv beside this file: PyTorch for this PC's NVIDIA card, then the
rem lab (lab.py says how; PowerShell: .\lab run). Needs Python 3.11+ from python.org.
setlocal
cd /d "%~dp0"
set "LAB_PY="
rem A Python that answers, not only a name on PATH (Windows' "python" may be the Store's stub).
rem (errorlevel, not &&: Wine's cmd runs what follows && after a command it did not find)
py -3 --version >nul 2>nul
if not errorlevel 1 set "LAB_PY=py -3"
if not defined LAB_PY (
    python --version >nul 2>nul
    if not errorlevel 1 set "LAB_PY=python"
)
if not defined LAB_PY (
    echo Python 3.11 or newer is needed: install it from https://www.python.org/downloads/ ^(tick "Add python.exe to PATH"^), then run this again.
    exit /b 1
)
%LAB_PY% "%~dp0lab.py" %*
exit /b %ERRORLEVEL%
