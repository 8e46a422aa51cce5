"""Back after a reboot: a per-user entry that starts the queue runner at the next logon
(`ternit queue autostart on|off|status`, and the window's «Продолжать очередь после
перезагрузки»; off by default).

A sign-out ends a user's processes (Windows; often Linux too: logind's KillUserProcesses,
per-app scopes), and after an update restart Windows waits at the sign-in screen unless the
user lets it sign in: so the queue goes on at the next logon, and says so — not at boot.

- Linux: an XDG autostart file, `$XDG_CONFIG_HOME/autostart/ternit-lab-queue.desktop`.
  (At boot instead, without a logon, would take a `systemd --user` unit and
  `loginctl enable-linger`: not offered here.)
- Windows: a Task Scheduler task registered from XML (`schtasks /Create /XML`) with a
  LogonTrigger for this user (plain `/SC ONLOGON` means anyone's logon and is often refused
  to a standard user), on batteries too and with no 72-hour limit; where the task is
  refused, a shortcut in the user's Startup folder.
- macOS: a LaunchAgent, `~/Library/LaunchAgents/lab.ternit.queue.plist` (RunAtLoad).

Every entry carries what the lab runs with — the interpreter, the folder of its code, the
lab's folder (TERNIT_HOME, when set) and the language — and runs `python -m
app.queue.logon`, which starts the detached runner. `status()` finds an entry that points
at a lab that moved or is gone; `off` removes it even then.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from ..base import paths
from ..base.i18n import current_language, t
from . import detach

ENTRY = "ternit-lab-queue"
TASK = "Ternit Lab queue"
MAC_LABEL = "lab.ternit.queue"
TASK_NS = "http://schemas.microsoft.com/windows/2004/02/mit/task"


@dataclass(frozen=True)
class Entry:
    """What the logon entry runs with."""

    python: str
    code: str            # the folder holding app/ (its working folder)
    home: str | None     # TERNIT_HOME, when the lab runs with one
    data: str            # the lab's data folder (how a stale entry is found)
    lang: str

    def args(self) -> list[str]:
        out = ["-m", "app.queue.logon", "--data", self.data, "--lang", self.lang]
        return out + (["--home", self.home] if self.home else [])

    def argv(self) -> list[str]:
        return [self.python, *self.args()]


@dataclass(frozen=True)
class Status:
    installed: bool
    path: Path | None    # the file that holds it (the task: its XML as given, beside the lab)
    kind: str            # xdg | task | startup | launchagent
    stale: str = ""      # why it no longer fits this lab ("" when it does)
    command: str = ""

    def text(self) -> str:
        if not self.installed:
            return t("автозапуск очереди выключен", "queue autostart is off")
        head = t(f"автозапуск очереди включён ({self.kind}: {self.path})",
                 f"queue autostart is on ({self.kind}: {self.path})")
        if self.stale:
            return head + t(f"; запись устарела: {self.stale} — ternit queue autostart on перепишет её, "
                            "off уберёт", f"; the entry is stale: {self.stale} — ternit queue autostart on "
                            "rewrites it, off removes it")
        return head


def current() -> Entry:
    code = paths.trainer_root() or str(Path(__file__).resolve().parents[2])
    home = os.environ.get("TERNIT_HOME")
    python = detach.interpreter()
    return Entry(python, code, str(Path(home).resolve()) if home else None, str(paths.data_dir().resolve()),
                 current_language())


def platform() -> str:
    if os.name == "nt":
        return "windows"
    return "mac" if sys.platform == "darwin" else "linux"


# ---- Linux: XDG autostart -------------------------------------------------------------------
def xdg_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "autostart" / f"{ENTRY}.desktop"


def desktop_quote(arg: str) -> str:
    """One Exec argument as the Desktop Entry spec quotes it: in double quotes when it holds
    a reserved character, with `"`, `` ` ``, `$` and `\\` escaped; `%` doubled (field codes)."""
    arg = arg.replace("%", "%%")
    if arg and not any(c in arg for c in ' \t\n"\'\\><~|&;$*?#()`'):
        return arg
    return '"' + "".join("\\" + c if c in '"`$\\' else c for c in arg) + '"'


def desktop_text(entry: Entry) -> str:
    exec_line = " ".join(desktop_quote(a) for a in entry.argv())
    return "\n".join([
        "[Desktop Entry]",
        "Type=Application",
        "Name=Ternit Lab queue",
        "Comment=" + t("Продолжает очередь обучения Ternit Lab после входа в систему",
                       "Carries the Ternit Lab training queue on after logon", entry.lang),
        f"Exec={exec_line}",
        f"Path={entry.code}",
        "Terminal=false",
        "NoDisplay=true",
        "X-GNOME-Autostart-enabled=true",
        f"X-Ternit-Data={entry.data}",
        "",
    ])


def _desktop_keys(text: str) -> dict[str, str]:
    keys: dict[str, str] = {}
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep and not line.startswith("#"):
            keys.setdefault(k.strip(), v.strip())
    return keys


def desktop_argv(exec_line: str) -> list[str]:
    """The Exec line back to its arguments, as the Desktop Entry spec reads it: `"…"` quotes,
    `\\` escaping `"`, `` ` ``, `$` and `\\` inside them, `%%` a percent sign."""
    out: list[str] = []
    cur, quoted, started, i = "", False, False, 0
    while i < len(exec_line):
        c = exec_line[i]
        if quoted and c == "\\" and i + 1 < len(exec_line) and exec_line[i + 1] in '"`$\\':
            cur, i = cur + exec_line[i + 1], i + 2
            continue
        if c == '"':
            quoted, started = not quoted, True
        elif c in " \t" and not quoted:
            if cur or started:
                out.append(cur)
            cur, started = "", False
        else:
            cur += c
        i += 1
    if quoted:
        raise ValueError("an unclosed quote in Exec")
    if cur or started:
        out.append(cur)
    return [a.replace("%%", "%") for a in out]


# ---- Windows: Task Scheduler (and the Startup folder) ------------------------------------------
def task_user() -> str:
    domain = os.environ.get("USERDOMAIN")
    user = os.environ.get("USERNAME") or os.environ.get("USER") or ""
    return f"{domain}\\{user}" if domain else user


def task_xml(entry: Entry, user: str) -> str:
    """The task's definition (Task Scheduler schema 1.3: Windows 7 and later): at this user's logon, as this user
    with least privilege, on batteries too, with no time limit, one instance at a time."""
    args = subprocess.list2cmdline(entry.args())
    x = escape
    return f"""<?xml version="1.0" encoding="UTF-16"?>
<Task version="1.3" xmlns="{TASK_NS}">
  <RegistrationInfo>
    <Description>{x(t("Продолжает очередь обучения Ternit Lab после входа в систему",
                      "Carries the Ternit Lab training queue on after logon", entry.lang))}</Description>
  </RegistrationInfo>
  <Triggers>
    <LogonTrigger>
      <Enabled>true</Enabled>
      <UserId>{x(user)}</UserId>
    </LogonTrigger>
  </Triggers>
  <Principals>
    <Principal id="Author">
      <UserId>{x(user)}</UserId>
      <LogonType>InteractiveToken</LogonType>
      <RunLevel>LeastPrivilege</RunLevel>
    </Principal>
  </Principals>
  <Settings>
    <MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>
    <DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>
    <StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>
    <AllowHardTerminate>true</AllowHardTerminate>
    <StartWhenAvailable>false</StartWhenAvailable>
    <Enabled>true</Enabled>
    <Hidden>false</Hidden>
    <ExecutionTimeLimit>PT0S</ExecutionTimeLimit>
    <Priority>7</Priority>
  </Settings>
  <Actions Context="Author">
    <Exec>
      <Command>{x(entry.python)}</Command>
      <Arguments>{x(args)}</Arguments>
      <WorkingDirectory>{x(entry.code)}</WorkingDirectory>
    </Exec>
  </Actions>
</Task>
"""


def task_copy_path() -> Path:
    """The XML the task was made from, kept beside the lab (status and stale detection read it:
    asking schtasks for it back needs no privilege either, but is slow)."""
    return paths.config_dir() / f"{ENTRY}.task.xml"


def startup_folder() -> Path:
    appdata = os.environ.get("APPDATA") or str(Path.home() / "AppData" / "Roaming")
    return Path(appdata) / "Microsoft" / "Windows" / "Start Menu" / "Programs" / "Startup"


def startup_path() -> Path:
    return startup_folder() / f"{ENTRY}.cmd"


def startup_text(entry: Entry) -> str:
    """The Startup folder's fallback: a command file that starts the windowless Python and
    ends (its console shows for a moment at logon; a .lnk would need the shell's COM)."""
    return "\r\n".join([
        "@echo off",
        "rem " + TASK + ": " + t("продолжает очередь после входа в систему", "carries the queue on after logon",
                                 entry.lang),
        f"rem X-Ternit-Data={entry.data}",
        f'cd /d "{entry.code}"',
        "start \"\" " + subprocess.list2cmdline(entry.argv()),
        "",
    ])


def _schtasks(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["schtasks", *args], capture_output=True, text=True, timeout=60,
                          creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))


# ---- macOS: a LaunchAgent ------------------------------------------------------------------
def plist_path() -> Path:
    return Path.home() / "Library" / "LaunchAgents" / f"{MAC_LABEL}.plist"


def plist_text(entry: Entry) -> str:
    args = "".join(f"\n    <string>{escape(a)}</string>" for a in entry.argv())
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
  <key>Label</key>
  <string>{MAC_LABEL}</string>
  <key>ProgramArguments</key>
  <array>{args}
  </array>
  <key>WorkingDirectory</key>
  <string>{escape(entry.code)}</string>
  <key>RunAtLoad</key>
  <true/>
</dict>
</plist>
"""


# ---- on / off / status ---------------------------------------------------------------------
def _write(path: Path, text: str, newline: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline=newline) as f:
        f.write(text)
    os.chmod(tmp, 0o644)  # never world-writable, whatever the umask: it runs a program at logon
    os.replace(tmp, path)


def on(entry: Entry | None = None, where: str | None = None) -> Status:
    """Install (or rewrite) the entry for this lab."""
    entry = entry or current()
    where = where or platform()
    if where == "linux":
        _write(xdg_path(), desktop_text(entry))
    elif where == "mac":
        _write(plist_path(), plist_text(entry))
    else:
        _windows_on(entry)
    return status(where)


def _windows_on(entry: Entry, schtasks: Callable[..., subprocess.CompletedProcess] | None = None) -> None:
    xml = task_xml(entry, task_user())
    copy = task_copy_path()
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(xml, encoding="utf-16")  # schtasks reads the XML as it declares it
    try:
        done = (schtasks or _schtasks)("/Create", "/TN", TASK, "/XML", str(copy), "/F")
        refused = done.returncode != 0
    except (OSError, subprocess.SubprocessError):
        refused = True
    if not refused:
        startup_path().unlink(missing_ok=True)
        return
    # Refused (a policy, a standard user on some editions): the Startup folder instead.
    copy.unlink(missing_ok=True)
    _write(startup_path(), startup_text(entry), newline="")


def switch(on_: bool) -> str:
    """The window's «Продолжать очередь после перезагрузки»: on or off, and what it now is."""
    try:
        return (on() if on_ else off()).text()
    except OSError as e:
        return t(f"Автозапуск очереди не изменён: {e}", f"Queue autostart not changed: {e}")


def off(where: str | None = None) -> Status:
    """Remove the entry, whatever lab it points at."""
    where = where or platform()
    if where == "linux":
        xdg_path().unlink(missing_ok=True)
    elif where == "mac":
        plist_path().unlink(missing_ok=True)
    else:
        if task_copy_path().exists():
            try:
                _schtasks("/Delete", "/TN", TASK, "/F")
            except (OSError, subprocess.SubprocessError):
                pass  # no schtasks: nothing was registered through it
            task_copy_path().unlink(missing_ok=True)
        startup_path().unlink(missing_ok=True)
    return status(where)


def status(where: str | None = None) -> Status:
    where = where or platform()
    if where == "linux":
        return _file_status(xdg_path(), "xdg", lambda text: _desktop_entry(text))
    if where == "mac":
        return _file_status(plist_path(), "launchagent", _plist_entry)
    task = _file_status(task_copy_path(), "task", _task_entry)
    return task if task.installed else _file_status(startup_path(), "startup", _startup_entry)


def _file_status(path: Path, kind: str, parse: object) -> Status:
    try:
        text = path.read_text(encoding="utf-16" if kind == "task" else "utf-8")
    except (OSError, UnicodeError):
        return Status(False, None, kind)
    argv, data = parse(text)  # type: ignore[operator]
    return Status(True, path, kind, stale_reason(argv, data), " ".join(argv))


def _desktop_entry(text: str) -> tuple[list[str], str]:
    keys = _desktop_keys(text)
    try:
        argv = desktop_argv(keys.get("Exec", ""))
    except ValueError:
        argv = []
    return argv, keys.get("X-Ternit-Data", "")


def _arg_after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1] if flag in argv[:-1] else ""


def _task_entry(text: str) -> tuple[list[str], str]:
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(text.replace('encoding="UTF-16"', ""))
    except ET.ParseError:
        return [], ""
    ns = {"t": TASK_NS}
    command = root.findtext("t:Actions/t:Exec/t:Command", "", ns)
    args = _split_windows(root.findtext("t:Actions/t:Exec/t:Arguments", "", ns))
    argv = [command, *args]
    return argv, _arg_after(argv, "--data")


def _startup_entry(text: str) -> tuple[list[str], str]:
    line = next((ln for ln in text.splitlines() if ln.startswith('start "" ')), "")
    argv = _split_windows(line[len('start "" '):])
    return argv, _arg_after(argv, "--data")


def _plist_entry(text: str) -> tuple[list[str], str]:
    import plistlib

    try:
        argv = [str(a) for a in plistlib.loads(text.encode()).get("ProgramArguments", [])]
    except (ValueError, plistlib.InvalidFileException):
        argv = []
    return argv, _arg_after(argv, "--data")


def _split_windows(line: str) -> list[str]:
    """A command line split as list2cmdline joined it (double quotes, backslashes before them)."""
    out, cur, quoted, slashes, any_ = [], "", False, 0, False
    for c in line:
        if c == "\\":
            slashes += 1
            continue
        if c == '"':
            cur += "\\" * (slashes // 2)
            if slashes % 2:
                cur += '"'
            else:
                quoted = not quoted
                any_ = True
            slashes = 0
            continue
        cur += "\\" * slashes
        slashes = 0
        if c in " \t" and not quoted:
            if cur or any_:
                out.append(cur)
            cur, any_ = "", False
        else:
            cur += c
    cur += "\\" * slashes
    if cur or any_:
        out.append(cur)
    return out


def stale_reason(argv: list[str], data: str) -> str:
    """Why an entry no longer fits this lab ("" when it does): its interpreter or the lab it
    points at is gone, or it is another lab's (this one moved)."""
    if not argv:
        return t("в ней нет команды", "it holds no command")
    if not Path(argv[0]).exists():
        return t(f"интерпретатора {argv[0]} больше нет", f"its interpreter {argv[0]} is gone")
    if not data or not Path(data).is_dir():
        return t(f"лаборатории {data or '?'} больше нет (перенесена или удалена)",
                 f"the lab {data or '?'} is gone (moved or deleted)")
    if Path(data).resolve() != paths.data_dir().resolve():
        return t(f"она ведёт другую лабораторию ({data})", f"it carries another lab on ({data})")
    return ""
