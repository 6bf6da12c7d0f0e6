"""The tables and columns that make a database a coordinator's store, and the check made
before a store is used: a database is either new (no tables: the schema is made) or holds
every table with every column. Another program's database, or a store that lost a table, is
refused and left as it is: opening it as a store added our tables to the one and made the
other's missing table again, empty, dropping the attempts it held without a word."""

from __future__ import annotations

from collections.abc import Mapping, Set
from string import Template

from fedhh.errors import ConfigError

STORE_COLUMNS: dict[str, frozenset[str]] = {
    "devices": frozenset({"device_id", "credential_hash", "identity_key", "label",
                          "enrolled_at"}),
    "runs": frozenset({"run_id", "config", "state", "eps_local", "tree", "ledger",
                       "deny_codes", "error", "created_at", "updated_at"}),
    "rounds": frozenset({"run_id", "round", "attempt", "state", "reason", "participants",
                         "summary", "started_at", "finished_at"}),
    "enrollment_tokens": frozenset({"token_hash", "label", "expires_at", "used_by",
                                    "used_at"}),
    "device_spends": frozenset({"device_id", "run_id", "eps", "delta", "charged_at"}),
}


# The schema both stores make, in their own words for the four kinds of column that differ
# (store_schema); written once, so that a column added to one store is in the other.
_SCHEMA = Template("""
CREATE TABLE IF NOT EXISTS devices (
    device_id $generated_id,
    credential_hash $blob NOT NULL,
    identity_key $blob NOT NULL UNIQUE,
    label TEXT NOT NULL DEFAULT '',
    enrolled_at $real NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    state TEXT NOT NULL,
    eps_local $real NOT NULL,
    tree TEXT NOT NULL,
    ledger TEXT NOT NULL,
    deny_codes TEXT NOT NULL,
    error TEXT NOT NULL DEFAULT '',
    created_at $real NOT NULL,
    updated_at $real NOT NULL
);
CREATE TABLE IF NOT EXISTS rounds (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    round INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    state TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    participants INTEGER NOT NULL DEFAULT 0,
    summary TEXT NOT NULL DEFAULT '{}',
    started_at $real NOT NULL,
    finished_at $real,
    PRIMARY KEY (run_id, round, attempt)
);
CREATE TABLE IF NOT EXISTS enrollment_tokens (
    token_hash $blob PRIMARY KEY,
    label TEXT NOT NULL DEFAULT '',
    expires_at $real,
    used_by $device_ref REFERENCES devices(device_id),
    used_at $real
);
CREATE TABLE IF NOT EXISTS device_spends (
    device_id $device_ref NOT NULL REFERENCES devices(device_id),
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    eps $real NOT NULL,
    delta $real NOT NULL,
    charged_at $real NOT NULL,
    PRIMARY KEY (device_id, run_id)
);
""")


def store_schema(*, generated_id: str, device_ref: str, blob: str, real: str) -> str:
    """The DDL that makes ``STORE_COLUMNS``' tables (each ``IF NOT EXISTS``), given the
    database's column types: ``generated_id`` the devices' key the database numbers,
    ``device_ref`` a column naming a device, ``blob`` bytes, ``real`` a float (a Unix time
    or an epsilon)."""
    return _SCHEMA.substitute(generated_id=generated_id, device_ref=device_ref, blob=blob,
                              real=real)


def check_store_tables(found: Mapping[str, Set[str]], location: str) -> bool:
    """True if the database holds no table (a new store, whose schema is to be made), False
    if it is a store (every table of ``STORE_COLUMNS`` with its columns; other tables beside
    them are left alone); ConfigError naming what is wrong otherwise. ``found``: each table's
    column names."""
    if not found:
        return True
    ours = [name for name in STORE_COLUMNS if name in found]
    if not ours:
        shown = ", ".join(sorted(found)[:5]) + (", ..." if len(found) > 5 else "")
        raise ConfigError(f"--db {location} is not a fedhh store (it holds the tables "
                          f"{shown}); give the coordinator a database of its own. It is left "
                          "as it is")
    missing = [name for name in STORE_COLUMNS if name not in found]
    if missing:
        are = "tables {} are".format(", ".join(missing)) if len(missing) > 1 \
            else f"table {missing[0]} is"
        raise ConfigError(f"--db {location} is not a whole store: its {are} missing (a "
                          "damaged store: restore it from a backup; another program's "
                          "database: give the coordinator one of its own). It is left as it is")
    for name, columns in STORE_COLUMNS.items():
        lacking = sorted(columns - set(found[name]))
        if lacking:
            raise ConfigError(f"--db {location} is a damaged store or not a fedhh store: the "
                              f"table {name} has no column {', '.join(lacking)}. It is left "
                              "as it is")
    return False


def no_store_there(location: str) -> str:
    """The refusal of a selector given a database that holds no store."""
    return (f"--db {location}: no coordinator store there (a selector reads the "
            "coordinator's; start the coordinator first, with the same --db)")
