"""Which machine takes which queued run, and when: the scheduler's rule and the predicted
timeline are one pure function (`predict`), so the list can never promise what the runner
would not do. The runner starts the slots whose start is now (`startable`).

The rule, in queue order: a run goes to the first machine that can take it, honouring its
target (local, kaggle, any) and account choice.
- This PC's card holds one run at a time, and nothing starts on it that the sizing says it
  cannot hold.
- A Kaggle account takes a run while its capacity (quota left minus what the legs running on
  it have reserved: each its kernel's limit plus the margin, as app/kaggle/picker.py counts
  them) covers the run's «Лимит, мин» plus the margin, within Kaggle's limit of concurrent
  GPU sessions per account. Among the accounts that can, «Авто» chooses as it always does
  (the one already holding the checkpoint and the data, then the most quota).
- The chain rule: a run that no account could cover even with its running legs done, but
  that the accounts' quota together could, starts on the account with the most capacity
  (at least the margin and a minute) and goes on as the next leg on another account, as a
  Kaggle run does outside the queue.
- A run that cannot start now waits: its slot says when it is expected to start (a machine
  freeing, a leg ending, the weekly quota refresh). A run that no allowed machine can ever
  hold (the sizing's fit) is `never` and the runner skips it, saying why.

Times are unix seconds. Nothing here reads the clock, the state or the network.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ..base.i18n import t
from ..kaggle.picker import Candidate, Want, pick
from ..kaggle.quota import hours

LOCAL = "local"
KAGGLE = "kaggle:"  # + the account's name
WEEK_S = 7 * 86400.0
HORIZON_S = 15 * 86400.0  # beyond two refreshes nothing is planned
MIN_LEG_S = 60.0  # a chained first leg shorter than this is not worth a kernel's set-up


def kaggle_machine(username: str) -> str:
    return KAGGLE + username


def machine_account(machine: str | None) -> str | None:
    """The account of a 'kaggle:NAME' machine (None for this PC or none)."""
    return machine[len(KAGGLE):] if machine and machine.startswith(KAGGLE) else None


@dataclass(frozen=True)
class Fit:
    """A run on one kind of machine: its expected wall time, start to end, and whether the
    sizing says it fits there (None: not known — allowed)."""

    seconds: float
    fits: bool | None = True
    why: str = ""


@dataclass(frozen=True)
class Job:
    """What the planner needs of one queued run."""

    item_id: int
    target: str = "any"            # local | kaggle | any
    account: str = "auto"          # auto or a Kaggle account's name
    local: Fit | None = None       # None: no estimate for this PC (then it does not go there)
    kaggle: Fit | None = None
    limit_s: float = 630 * 60.0    # «Лимит, мин»: a Kaggle session of this run lasts at most this
    want: Want = Want()


@dataclass(frozen=True)
class Lease:
    """A Kaggle session on an account, running or planned."""

    start: float
    end: float          # expected
    reserved_s: float   # quota held while it runs (its kernel's limit, what is left of it)
    use_s: float        # quota expected to be used from `start` to `end`


@dataclass(frozen=True)
class Account:
    username: str
    quota_s: float                  # quota left now, before the running legs' reservations
    total_s: float                  # the weekly quota (what a refresh gives back)
    refresh_at: float | None
    max_sessions: int
    running: tuple[Lease, ...] = ()
    usable: bool = True             # False: its key was refused or is missing
    why_not: str = ""
    holds: frozenset[str] = frozenset()

    def capacity_now(self, now: float) -> float:
        return self.quota_s - sum(x.reserved_s for x in self.running if x.start <= now < x.end)


@dataclass(frozen=True)
class World:
    now: float
    margin_s: float                 # the Kaggle margin (set-up, last checkpoint, outputs)
    local_free_at: float            # when this PC's card is free (now if it is)
    accounts: tuple[Account, ...] = ()


@dataclass(frozen=True)
class Slot:
    """Where and when one queued run is expected to train."""

    item_id: int
    machine: str | None             # 'local', 'kaggle:NAME', or None (nowhere yet)
    start: float | None
    end: float | None
    reason: str = ""                # why it waits, or how it goes (chain)
    never: bool = False             # no allowed machine can ever hold it as it is
    chain: bool = False             # its quota does not cover it: continues on another account
    limit_s: float | None = None    # a Kaggle leg's own limit (the quota may cut it)

    @property
    def account(self) -> str | None:
        return machine_account(self.machine)


def startable(slots: Iterable[Slot], now: float) -> list[Slot]:
    """The slots the runner starts now, in queue order."""
    return [s for s in slots if s.machine is not None and s.start is not None and s.start <= now]


def predict(jobs: Sequence[Job], world: World) -> list[Slot]:
    """Every job's slot, placed in queue order as the runner would place them."""
    sim = _Sim(world)
    return [sim.place(job) for job in jobs]


def refresh_times(account: Account, now: float, until: float) -> list[float]:
    """The account's quota refreshes in (now, until]: the known one and the weeks after."""
    if account.refresh_at is None:
        return []
    r = account.refresh_at
    while r <= now:
        r += WEEK_S
    out = []
    while r <= until:
        out.append(r)
        r += WEEK_S
    return out


@dataclass
class _Option:
    start: float
    end: float
    machine: str
    reason: str = ""
    chain: bool = False
    limit_s: float | None = None
    lease: Lease | None = None


@dataclass
class _Sim:
    world: World
    local_free: float = 0.0
    leases: dict[str, list[Lease]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        w = self.world
        self.local_free = max(w.now, w.local_free_at)
        self.leases = {a.username: [_alive(x, w.now) for x in a.running] for a in w.accounts}

    # -- placing ------------------------------------------------------------------------------
    def place(self, job: Job) -> Slot:
        local, local_why, local_never = self._local(job)
        kaggle, kaggle_why, kaggle_never = self._kaggle(job)
        options = [o for o in (local, kaggle) if o is not None]  # this PC first on a tie
        if not options:
            never = local_never and kaggle_never
            why = "; ".join(w for w in (local_why, kaggle_why) if w)
            return Slot(job.item_id, None, None, None, why, never=never)
        best = min(options, key=lambda o: o.start)
        if best.machine == LOCAL:
            self.local_free = best.end
        elif best.lease is not None:
            self.leases[machine_account(best.machine) or ""].append(best.lease)
        reason = best.reason
        if best.start > self.world.now and not reason:
            reason = local_why if best.machine == LOCAL else kaggle_why
        return Slot(job.item_id, best.machine, best.start, best.end, reason, chain=best.chain, limit_s=best.limit_s)

    def _local(self, job: Job) -> tuple[_Option | None, str, bool]:
        if job.target == "kaggle":
            return None, "", True
        fit = job.local
        if fit is None:
            return None, t("нет оценки для этого ПК", "no estimate for this PC"), True
        if fit.fits is False:
            return None, fit.why or t("не помещается на этом ПК", "does not fit on this PC"), True
        start = self.local_free
        why = "" if start <= self.world.now else t("этот ПК занят", "this PC is busy")
        return _Option(start, start + fit.seconds, LOCAL, why), why, False

    def _kaggle(self, job: Job) -> tuple[_Option | None, str, bool]:
        if job.target == "local":
            return None, "", True
        fit = job.kaggle
        if fit is None:
            return None, t("нет оценки для Kaggle", "no estimate for Kaggle"), True
        if fit.fits is False:
            return None, fit.why or t("не помещается на 2×T4 Kaggle", "does not fit on Kaggle's 2×T4"), True
        accounts = [a for a in self.world.accounts if job.account in ("auto", "", a.username)]
        if job.account not in ("auto", "") and not accounts:
            return None, t(f"аккаунт {job.account} не добавлен: ternit kaggle add-account",
                           f"account {job.account} is not added: ternit kaggle add-account"), False
        usable = [a for a in accounts if a.usable]
        if not usable:
            return None, t("нет аккаунта Kaggle с рабочим ключом", "no Kaggle account with a working key"), False
        now = self.world.now
        times = sorted({now, *(x.end for a in usable for x in self._leases(a) if x.end > now),
                        *(r for a in usable for r in refresh_times(a, now, now + HORIZON_S))})
        for at in times:
            found = self._covering(usable, job, at) or self._chained(usable, job, at)
            if found:
                best = self._prefer(found, job)
                if at > now and not best.reason:
                    best.reason = self._wait_text(usable, at)
                return best, best.reason, False
        return None, self._no_quota_text(usable), False

    def _covering(self, usable: list[Account], job: Job, at: float) -> list[_Option]:
        """The accounts that can take the whole run at `at`: a session free, and capacity for
        its «Лимит, мин» plus the margin that no run planned before it counted on."""
        need = job.limit_s + self.world.margin_s
        out = []
        for acct in usable:
            if self._sessions(acct, at) < acct.max_sessions and self._capacity(acct.username, at) >= need:
                option = self._option(acct, job, at, job.limit_s, chain=False)
                if option is not None:
                    out.append(option)
        return out

    def _chained(self, usable: list[Account], job: Job, at: float) -> list[_Option]:
        """The chain rule at `at`: no account's quota could hold the whole run, but together
        they can; a first leg goes where nothing else runs, for what the account holds."""
        margin = self.world.margin_s
        quotas = [self._capacity(a.username, at, held=False) for a in usable]
        if max(quotas) >= job.limit_s + margin or sum(max(0.0, q - margin) for q in quotas) < job.limit_s:
            return []
        out = []
        for acct in usable:
            cap = self._capacity(acct.username, at)
            if self._sessions(acct, at) < acct.max_sessions and cap - margin >= MIN_LEG_S:
                option = self._option(acct, job, at, min(job.limit_s, cap - margin), chain=True)
                if option is not None:
                    out.append(option)
        return out

    def _option(self, acct: Account, job: Job, at: float, limit: float, chain: bool) -> _Option | None:
        fit = job.kaggle
        assert fit is not None
        use = min(fit.seconds, limit)
        lease = Lease(at, at + use, limit + self.world.margin_s, use)  # a leg holds its limit and the margin
        if not self._keeps_promises(acct, lease):
            return None
        reason = ""
        if chain:
            reason = t(f"{acct.username}: квоты ({hours(limit)}) не хватает на весь прогон — дальше продолжится "
                       "на другом аккаунте",
                       f"{acct.username}: its quota ({hours(limit)}) does not cover the whole run — it will "
                       "continue on another account")
        end = at + (fit.seconds if chain else use)
        return _Option(at, end, kaggle_machine(acct.username), reason, chain, limit, lease)

    def _prefer(self, options: list[_Option], job: Job) -> _Option:
        """Among the accounts that can, «Авто»'s own preference (app/kaggle/picker.py)."""
        if len(options) == 1:
            return options[0]
        by_name = {machine_account(o.machine) or "": o for o in options}
        holds = {a.username: a.holds for a in self.world.accounts}
        at = options[0].start
        cands = [Candidate(name, self._capacity(name, at), True, holds.get(name, frozenset())) for name in by_name]
        chosen = pick(cands, job.limit_s / 60.0, self.world.margin_s / 60.0, job.want)
        return by_name.get(chosen.username or "", options[0])

    # -- one account ------------------------------------------------------------------------------
    def _leases(self, acct: Account) -> list[Lease]:
        return self.leases.setdefault(acct.username, [])

    def _account(self, username: str) -> Account:
        return next(a for a in self.world.accounts if a.username == username)

    def _sessions(self, acct: Account, at: float) -> int:
        return sum(1 for x in self._leases(acct) if x.start <= at < x.end)

    def _capacity(self, username: str, at: float, extra: Lease | None = None, held: bool = True) -> float:
        """Quota left at `at` minus (with `held`) what the sessions running then hold; a
        refresh in between gives the week's quota back (what ended before it counts for the
        old week)."""
        acct = self._account(username)
        leases = self._leases(acct) + ([extra] if extra is not None else [])
        past = refresh_times(acct, self.world.now, at)
        last = past[-1] if past else None
        quota = acct.total_s if last is not None else acct.quota_s
        used = sum(x.use_s for x in leases if x.end <= at and (last is None or x.end > last))
        reserved = sum(x.reserved_s for x in leases if x.start <= at < x.end) if held else 0.0
        return quota - used - reserved

    def _keeps_promises(self, acct: Account, lease: Lease) -> bool:
        """A new session must not take quota that a session planned later counted on."""
        later = {x.start for x in self._leases(acct) if x.start > lease.start}
        later |= {x.end for x in self._leases(acct) if x.end > lease.start}
        return all(self._capacity(acct.username, at, lease) >= 0 for at in later | {lease.start})

    # -- words --------------------------------------------------------------------------------------
    def _wait_text(self, usable: list[Account], at: float) -> str:
        refresh = [a for a in usable if at in refresh_times(a, self.world.now, at)]
        if refresh:
            return t(f"ждёт обновления квоты {refresh[0].username} ({_clock(at)})",
                     f"waits for {refresh[0].username}'s quota to refresh ({_clock(at)})")
        return t("ждёт свободный сеанс или квоту Kaggle", "waits for a free Kaggle session or quota")

    def _no_quota_text(self, usable: list[Account]) -> str:
        return t(f"ни у одного аккаунта ({', '.join(a.username for a in usable)}) не будет квоты в ближайшие две недели",
                 f"no account ({', '.join(a.username for a in usable)}) will have the quota within two weeks")


def _alive(lease: Lease, now: float) -> Lease:
    """A running session expected to have ended already is taken to end now (it still runs)."""
    if lease.end > now:
        return lease
    return Lease(lease.start, now + 1.0, lease.reserved_s, lease.use_s)


def _clock(at: float) -> str:
    return datetime.fromtimestamp(at).strftime("%d.%m %H:%M")
