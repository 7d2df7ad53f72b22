"""Distributed revalidation of a Parquet export on a real `dask.distributed.LocalCluster`:
1 worker vs 2 worker processes (one thread each) on 127.0.0.1, with the single-process
`revalidate_database` (the `ledgerfold revalidate` command) measured in the same run.

The database is `bench_revalidate.build_database`'s (the 244 real transcripts repeated
under unique IDs plus one long conversation; every conversation compacted once): 1M turns
under `make bench`, 5k in smoke mode. It is exported once (`export_parquet`, 16 parts, so
both workers get a balanced share); the export time is recorded, not judged. Each cluster
is started and warmed up (every worker has imported ledgerfold, pandas and pyarrow) before
it is timed: what is measured is one `revalidate_parquet` call, read of the Parquet parts
to the aggregate on the client. Every run's aggregate must equal the command's.

Target: 2 workers >= 1.6x faster than 1 worker (the partitions really are independent),
the 1-worker cluster timed in turn with the 2-worker one (one call before each round), as
every targeted anchor is.
The ratio to the single-process command is recorded, not judged: on one machine the command
(SQLite read + native hashing on every core, no export, no scheduler) is the faster tool;
the cluster is for more machines than one (docs/scale-out.md).
"""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow  # noqa: F401  (the export needs it; a missing extra must fail, not skip)
import pytest
from bench_conftest import anchor_seconds, full_size, interleaved, record_ratio, target

distributed = importlib.import_module("dask.distributed")
ldask = importlib.import_module("ledgerfold.dask")
bench_revalidate = importlib.import_module("bench_revalidate")

from ledgerfold.export import export_parquet  # noqa: E402
from ledgerfold.revalidate import revalidate_database  # noqa: E402

PARTS = 16
SAME = ("conversations", "summaries_checked", "current", "stale", "turns_hashed", "bytes_hashed")


@dataclass(frozen=True)
class Dataset:
    db: Path
    parquet: Path
    turns: int
    conversations: int
    build_s: float
    export_s: float


@pytest.fixture(scope="module")
def dataset(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    total = 1_000_000 if full_size(request.config) else 5_000
    base = tmp_path_factory.mktemp("dask")
    database = bench_revalidate.build_database(base / "ledger.db", total)
    started = time.perf_counter()
    report = export_parquet(database.path, base / "parquet", turns_per_file=total // PARTS)
    export_s = time.perf_counter() - started
    assert report.turns == database.turns
    return Dataset(
        database.path,
        base / "parquet",
        database.turns,
        database.conversations,
        database.build_seconds,
        export_s,
    )


@pytest.fixture(scope="module")
def command(dataset: Dataset, request: pytest.FixtureRequest) -> dict[str, Any]:
    """The single-process command on the same data: its aggregate and median seconds."""
    expected = revalidate_database(dataset.db, mark_stale=False).as_json()
    seconds = anchor_seconds(
        request.config,
        lambda: revalidate_database(dataset.db, mark_stale=False),
        rounds=3,
        budget_s=60,
    )
    return {"expected": expected, "seconds": seconds}


#: Imported on every worker before timing (a function of this module would not unpickle
#: there: `conftest` resolves differently in a worker process).
WARM_MODULES = ("ledgerfold.dask", "pandas", "pyarrow.parquet", "dask.dataframe")


@contextlib.contextmanager
def warm_client(workers: int, parquet: Path) -> Iterator[Any]:
    """A client of a local cluster of `workers` processes (one thread each), every worker
    warmed up: modules imported and one revalidation run, untimed."""
    cluster = distributed.LocalCluster(
        n_workers=workers,
        processes=True,
        threads_per_worker=1,
        host="127.0.0.1",
        dashboard_address=":0",  # any free port: two clusters run side by side
    )
    with cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(workers, timeout=120)
        for module in WARM_MODULES:
            client.run(importlib.import_module, module)
        ldask.revalidate_parquet(parquet, client=client)  # warm-up, not timed
        yield client


@pytest.mark.parametrize("workers", [1, 2], ids=["workers=1", "workers=2"])
def test_dask_revalidate_parquet(
    benchmark: Any,
    dataset: Dataset,
    command: dict[str, Any],
    workers: int,
    request: pytest.FixtureRequest,
) -> None:
    config = request.config
    rounds = 3 if full_size(config) else 1
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(warm_client(workers, dataset.parquet))
        if workers == 1:
            _, aggregate = benchmark.pedantic(
                ldask.revalidate_parquet,
                args=(dataset.parquet,),
                kwargs={"client": client},
                rounds=rounds,
            )
        else:
            one = stack.enter_context(warm_client(1, dataset.parquet))
            _, aggregate = interleaved(
                benchmark,
                config,
                lambda: ldask.revalidate_parquet(dataset.parquet, client=client),
                {"workers_1": lambda: ldask.revalidate_parquet(dataset.parquet, client=one)},
                rounds=rounds,
            )
    expected = command["expected"]
    assert {key: aggregate[key] for key in SAME} == {key: expected[key] for key in SAME}
    assert aggregate["stale"] == 0 and aggregate["workers"] == workers
    benchmark.extra_info.update(
        turns=dataset.turns,
        conversations=dataset.conversations,
        partitions=aggregate["partitions"],
        turns_hashed=aggregate["turns_hashed"],
        bytes_hashed=aggregate["bytes_hashed"],
        build_s=round(dataset.build_s, 1),
        export_s=round(dataset.export_s, 2),
    )
    record_ratio(benchmark, "revalidate_database", command["seconds"])
    if workers > 1:
        target(benchmark, "workers_1", min_speedup=1.6)
