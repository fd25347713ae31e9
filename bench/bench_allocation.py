"""Entry with allocation and the dashboard at issue 25's size, on PostgreSQL.

The study: 2,000 prompts x 4 systems, each prompt in 4 blocks of two systems (the cyclic pairs AB, BC, CD,
DA: 8,000 blocks of 2 responses), ``allocation: {blocks_per_participant: 20, judgements_per_block: 5}``,
so the target is 5 x 8,000 / 20 = 2,000 participants. It is built from a generated outputs file by the
tests' helper (``tests/support/generated_outputs.py``) and loaded with ``study_load``.

Then 2,000 entries (``services.participant_enroll``: the participant, their allocation under the study's
lock, their pages and counterbalanced responses) come from 20 clients at a time, each sending its next entry
when its last one returns. They are served as the production stack serves requests: by gunicorn's sync
workers (``config/gunicorn.conf.py``: 2 x cores + 1, so 5 on two cores), each a process with Django loaded and
one connection kept, serving one entry at a time, the others waiting their turn. An entry's time runs from
its sending to its return, the wait for a free server included, as a participant's request waits in
gunicorn's queue; the time inside a server is printed beside it. ``--servers 20`` gives every client its own
server process and connection, as this bench did before 2026-11-30 (more processes than production runs:
20 backends contending for two cores and the study's lock). A watcher samples the spread of the block
counters all along.
Finally every visit is marked answered and the dashboard (page and JSON) is timed as a researcher gets it:
first with the planner statistics the writes left (on a server with autovacuum off, as this machine's is,
those of empty tables), then after ANALYZE, as autovacuum would gather them within a minute or so. Each
timing also gives the server's CPU for a request and the database's own time for the JSON's queries
(EXPLAIN ANALYZE of each, summed), which depend less on the machine's load than the wall time.

Targets (issue 25): entry p95 <= 100 ms at 20 concurrent entries; block counts within 1 after 2,000
entries run 20 at a time; dashboard <= 1 s; whole analysis run with 2 workers <= 30 s. Each gets a PASS/FAIL line, with the load average.

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hev_allocation .venv/bin/python bench/bench_allocation.py
    ... bench/bench_allocation.py --prompts 200 --participants 200     # smaller (k and r as above)
    ... bench/bench_allocation.py --servers 20  # 20 server processes, one per client
    ... bench/bench_allocation.py --reuse       # only the dashboard, on the study an earlier run left
    CELERY_BROKER_URL=redis://127.0.0.1:6379/7 ... bench/bench_allocation.py --analysis   # and the analysis run

With ``--analysis``, every page is then answered in bulk (ratings by COPY, not HTTP) and a whole analysis run
is timed with ``--workers`` real ``celery worker`` processes (bench/bench_fanout.py's), after a warm-up run
(and after the dashboard's ANALYZE).

The database is the benchmark's own: its study ``bench-allocation`` is replaced on every run.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import statistics
import sys
import threading
import time
from collections import Counter
from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

SLUG = "bench-allocation"
K, R = 20, 5
CONCURRENT = 20  # --concurrent
USER = "bench-researcher"


def setup_django() -> None:
    import django

    django.setup()


def prepare(prompts: int) -> dict[str, float]:
    from django.core.management import call_command

    from surveys.definition import parse_definition
    from surveys.loader import study_load
    from surveys.models import Block, Item, Participant, Study
    from tests.support.generated_outputs import definition_from_outputs, outputs_rows

    call_command("migrate", verbosity=0)
    # Pages, then items and blocks first: they refer to the study's systems and scenarios (protected).
    for model in (Participant, Item, Block, Study):
        model.objects.filter(**({"slug": SLUG} if model is Study else {"study__slug": SLUG})).delete()
    started = time.perf_counter()
    definition = definition_from_outputs(outputs_rows(prompts), slug=SLUG, blocks_per_prompt=4,
                                         allocation={"blocks_per_participant": K, "judgements_per_block": R})
    built = time.perf_counter()
    study = study_load(definition=parse_definition(definition)).study
    loaded = time.perf_counter()
    return {"build_s": built - started, "load_s": loaded - built, "blocks": study.blocks.count(),
            "target": study.target_completions}


def _serve(study_id: int, tickets: multiprocessing.Queue, done: multiprocessing.Queue) -> None:
    """A server process, as a gunicorn sync worker: Django loaded, one connection kept, one entry at a time.

    A ticket is a client's entry: (client, its number, how many the client has left to send, when it was
    sent). The server takes the next ticket,
    serves the entry, reports (seconds since it was sent, seconds in this server), and hands the client's next
    entry back to the queue, sent now: each client has one entry in flight, as 20 participants who each wait
    for their page would. The clients cost no process of their own (the participants' browsers are not on
    this machine)."""
    setup_django()
    from django.conf import settings

    from surveys import services
    from surveys.models import Study

    # As a production worker runs: with DEBUG on, every query would also be kept and formatted for the debug
    # log, about a seventh of an entering process's CPU.
    settings.DEBUG = False
    study = Study.objects.get(pk=study_id)
    done.put(None)  # ready
    while (ticket := tickets.get()) is not None:
        client, number, remaining, sent = ticket
        started = time.monotonic()
        try:
            services.participant_enroll(study=study, external_id=f"{client:04x}{number:020x}",
                                        seed=client * 100_000 + number)
        except Exception as error:  # e.g. StudyFull when more entries are asked for than the target
            done.put(f"entry {number} of client {client}: {error!r}")
            continue
        finished = time.monotonic()
        if remaining > 1:
            tickets.put((client, number + 1, remaining - 1, finished))
        done.put((finished - sent, finished - started))


def _spread() -> int:
    from django.db.models import Max, Min

    from surveys.models import BlockTally

    bounds = BlockTally.objects.filter(study__slug=SLUG).aggregate(low=Min("allocated"), high=Max("allocated"))
    return bounds["high"] - bounds["low"]


def production_servers() -> int:
    """How many requests the production stack serves at once: its gunicorn sync workers
    (config/gunicorn.conf.py: GUNICORN_WORKERS, or 2 x cores + 1)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gunicorn_conf", ROOT / "config" / "gunicorn.conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    return conf.workers * conf.threads


def run_entries(participants: int, servers: int) -> dict:
    """``participants`` entries from CONCURRENT clients, each sending its next entry when its last returns, to
    ``servers`` server processes. An entry's time runs from its sending to its return, so it includes the wait
    for a free server, as a participant's request waits in gunicorn's queue."""
    from django.db import connection

    from surveys.models import Study

    study_id = Study.objects.get(slug=SLUG).pk
    connection.close()  # the servers open their own
    per_client = [participants // CONCURRENT + (c < participants % CONCURRENT) for c in range(CONCURRENT)]
    context = multiprocessing.get_context("fork")
    tickets, done = context.Queue(), context.Queue()
    spreads: list[int] = []
    stop = threading.Event()

    def watch() -> None:  # the spread of the counters while entries run
        while not stop.is_set():
            spreads.append(_spread())
            stop.wait(0.2)
        connection.close()

    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    processes = [context.Process(target=_serve, args=(study_id, tickets, done)) for _ in range(servers)]
    for process in processes:
        process.start()
    for _ in processes:
        done.get(timeout=300)  # every server ready
    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    for client, count in enumerate(per_client):
        if count:
            tickets.put((client, 0, count, started))
    results, failure = [], None
    while len(results) < sum(per_client) and failure is None:
        result = done.get(timeout=300)
        if isinstance(result, str):
            failure = result
        else:
            results.append(result)
    elapsed = time.monotonic() - started
    if failure is not None:  # the others' results are left unread: stop them rather than wait for them
        for process in processes:
            process.terminate()
        stop.set()
        sys.exit(f"an entry failed, the run stops: {failure}")
    for _ in processes:
        tickets.put(None)
    for process in processes:
        process.join()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    # The server processes' own CPU (Python and the driver), without PostgreSQL's: the part of an entry's cost
    # that does not depend on how busy the machine is.
    server_cpu = (children.ru_utime + children.ru_stime) - (children_before.ru_utime + children_before.ru_stime)
    stop.set()
    watcher.join()
    seconds = sorted(since_sent for since_sent, _ in results)
    in_server = sorted(served for _, served in results)
    return {"n": len(seconds), "elapsed_s": elapsed, "p50_ms": 1000 * statistics.median(seconds),
            "p95_ms": 1000 * seconds[int(0.95 * (len(seconds) - 1))], "max_ms": 1000 * seconds[-1],
            "served_p50_ms": 1000 * statistics.median(in_server),
            "served_p95_ms": 1000 * in_server[int(0.95 * (len(in_server) - 1))],
            "spreads": spreads, "final_spread": _spread(), "client_cpu_ms": 1000 * server_cpu / max(len(seconds), 1)}


def check_counts() -> dict:
    """Counts from the stored visits (not the counters), and how evenly blocks meet."""
    from surveys.models import BlockTally, BlockVisit

    visits = list(BlockVisit.objects.filter(participant__study__slug=SLUG, block__isnull=False)
                  .values_list("participant_id", "block_id"))
    per_block = Counter(block for _, block in visits)
    blocks = dict(BlockTally.objects.filter(study__slug=SLUG).values_list("block_id", "allocated"))
    by_person: dict[int, list[int]] = {}
    for person, block in visits:
        by_person.setdefault(person, []).append(block)
    together = Counter(pair for chosen in by_person.values() for pair in combinations(sorted(chosen), 2))
    counts = [per_block.get(block, 0) for block in blocks]
    return {"min": min(counts), "max": max(counts), "counters_agree": all(per_block.get(b, 0) == n for b, n in blocks.items()),
            "pairs_met": len(together), "max_times_a_pair_met": max(together.values(), default=0)}


def answer_everything(seed: int = 0) -> dict[str, float]:
    """Every page answered and every participant finished, written in bulk (ratings by COPY, the rest by one
    UPDATE each), not over HTTP: pages 45 s apart, ratings 1-5 with a per-system shift, checks passed."""
    import numpy as np
    from django.db import connection

    from surveys.models import ItemPlacement, Study

    started = time.perf_counter()
    study = Study.objects.get(slug=SLUG)
    dimension_id = study.dimensions.values_list("pk", flat=True).get()
    placements = np.array(ItemPlacement.objects.filter(visit__participant__study=study, visit__block__isnull=False)
                          .values_list("pk", "item__system_id"), dtype=np.int64)
    rng = np.random.default_rng(seed)
    shift = {system: k % 3 - 1 for k, system in enumerate(np.unique(placements[:, 1]))}
    values = np.clip(rng.integers(1, 6, len(placements)) + np.vectorize(shift.get)(placements[:, 1]), 1, 5)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM surveys_rating WHERE placement_id IN (SELECT p.id FROM surveys_itemplacement p "
                       "JOIN surveys_blockvisit v ON v.id = p.visit_id JOIN surveys_participant q ON q.id = "
                       "v.participant_id WHERE q.study_id = %s)", [study.pk])
        with cursor.copy("COPY surveys_rating (placement_id, dimension_id, value) FROM STDIN") as copy:
            for placement_id, value in zip(placements[:, 0].tolist(), values.tolist()):
                copy.write_row((placement_id, dimension_id, value))
        cursor.execute("UPDATE surveys_blockvisit v SET shown_at = q.started_at + v.sequence * interval '45 seconds', "
                       "submitted_at = q.started_at + v.sequence * interval '45 seconds' + interval '40 seconds', "
                       "attention_value = CASE WHEN v.attention_check_id IS NULL THEN NULL ELSE 2 END, "
                       "attention_passed = CASE WHEN v.attention_check_id IS NULL THEN NULL ELSE true END "
                       "FROM surveys_participant q WHERE q.id = v.participant_id AND q.study_id = %s", [study.pk])
        cursor.execute("UPDATE surveys_participant SET status = 'completed', demographics_done = true, "
                       "instructions_seen = true, finished_at = started_at + (blocks_assigned + 3) * interval '45 seconds' "
                       "WHERE study_id = %s", [study.pk])
        cursor.execute("UPDATE surveys_blockassignment SET state = 'completed' WHERE study_id = %s", [study.pk])
    return {"ratings": len(placements), "seconds": time.perf_counter() - started}


def time_analysis(workers: int) -> dict:
    """One warm-up run and one measured run of the whole analysis with ``workers`` real celery workers."""
    import tempfile

    import redis

    from analysis import registry
    from analysis.design import study_design
    from bench.bench_fanout import observe_run, print_parts, start_workers
    from surveys.models import Study

    broker_url = os.environ.get("CELERY_BROKER_URL", "")
    if not broker_url.startswith("redis"):
        sys.exit("--analysis needs CELERY_BROKER_URL=redis://127.0.0.1:6379/N (the bench's own database N)")
    redis.Redis.from_url(broker_url).flushdb()  # the bench's own Redis database: no message of an older run
    study = Study.objects.get(slug=SLUG)
    features = study_design(study.pk).features
    paper = {a.name for a in registry.statistics_analyses(design=features) if a.paper} | {"filter_flow"}
    logs = Path(tempfile.mkdtemp(prefix="bench-allocation-"))
    started = start_workers(workers, os.environ["DATABASE_URL"], broker_url, logs)
    runs = []
    try:
        for label in ("warm-up", "measured"):
            result = observe_run(study, paper)
            print(f"  analysis {label}: whole run {result['whole']:.2f} s (queued {result['queued']:.2f} s); "
                  f"load average {os.getloadavg()[0]:.2f}")
            print_parts(result["run"])
            runs.append(result)
    finally:
        for worker in started:
            worker.stop()
    print(f"  worker logs: {logs}")
    return {"whole_s": runs[-1]["whole"], "tables": runs[-1]["run"].tables.count()}


def time_dashboard(repeats: int = 3, *, answered: bool = False) -> dict:
    """The dashboard page and JSON as a researcher gets them: the best and worst of ``repeats`` each, the
    server's CPU for one of each (the test client runs the view in this process) and the database's own time
    for their queries (EXPLAIN ANALYZE of each, summed): the two figures that depend less on the machine's load."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.utils import timezone

    from surveys.models import BlockAssignment, BlockVisit, Participant, Study

    now = timezone.now()
    study = Study.objects.get(slug=SLUG)
    if not answered:  # Everyone answered and finished: the dashboard then reads every visit.
        BlockVisit.objects.filter(participant__study=study).update(shown_at=now, submitted_at=now)
        Participant.objects.filter(study=study).update(status="completed", finished_at=now, demographics_done=True)
        BlockAssignment.objects.filter(study=study).update(state="completed")
    user, _ = get_user_model().objects.get_or_create(username=USER, defaults={"is_staff": True})
    study.owners.add(user)
    client = Client()
    client.force_login(user)
    urls = {"page": f"/studies/{SLUG}/", "json": f"/studies/{SLUG}/dashboard.json"}
    client.get(urls["page"])  # a server process is long-running: templates compiled, connection open
    seconds: dict[str, list[float]] = {"page": [], "json": []}
    cpu: dict[str, list[float]] = {"page": [], "json": []}
    for _ in range(repeats):
        for name, url in urls.items():
            started, cpu_started = time.perf_counter(), time.process_time()
            response = client.get(url)
            seconds[name].append(time.perf_counter() - started)
            cpu[name].append(time.process_time() - cpu_started)
            assert response.status_code == 200
    coverage = response.json()["coverage"]
    queries: list[tuple[str, object]] = []

    def capture(execute, sql, params, many, context):
        queries.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        client.get(urls["json"])
    timed = []
    with connection.cursor() as cursor:
        for sql, params in queries:
            if sql.lstrip().upper().startswith("SELECT"):
                cursor.execute("EXPLAIN (ANALYZE, TIMING OFF) " + sql, params)
                timed.append((float(cursor.fetchall()[-1][0].split(":")[1].split()[0]), sql))
    database_ms = sum(ms for ms, _ in timed)
    return {"page_s": min(seconds["page"]), "json_s": min(seconds["json"]), "page_worst_s": max(seconds["page"]),
            "json_worst_s": max(seconds["json"]), "page_cpu_ms": 1000 * min(cpu["page"]),
            "json_cpu_ms": 1000 * min(cpu["json"]), "json_queries": len(queries), "json_database_ms": database_ms,
            "slowest": sorted(timed, reverse=True)[:4],
            "complete": coverage["complete"], "blocks": coverage["blocks"]}


def print_dashboard(dashboard: dict, statistics_state: str) -> None:
    print(f"dashboard ({statistics_state}): page {dashboard['page_s']:.2f} s (worst {dashboard['page_worst_s']:.2f}), "
          f"JSON {dashboard['json_s']:.2f} s (worst {dashboard['json_worst_s']:.2f}); server CPU page "
          f"{dashboard['page_cpu_ms']:.0f} ms, JSON {dashboard['json_cpu_ms']:.0f} ms; the JSON's "
          f"{dashboard['json_queries']} queries {dashboard['json_database_ms']:.0f} ms in EXPLAIN ANALYZE; "
          f"{dashboard['complete']} of {dashboard['blocks']} blocks complete (load average {os.getloadavg()[0]:.2f})")
    for ms, sql in dashboard["slowest"]:
        print(f"  {ms:7.1f} ms  {sql[:120]}")


def analyze_tables() -> str:
    """ANALYZE, as autovacuum does within a minute or so of large writes; and whether autovacuum is on here
    (a server with it off keeps the planner's estimates of empty tables: nested loops over 2,000 participants)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        autovacuum = cursor.fetchone()[0]
        cursor.execute("ANALYZE")
    return autovacuum


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def time_dashboards(*, answered: bool) -> None:
    """The dashboard right after the writes (planner statistics as they left them), then after ANALYZE."""
    for state in ("statistics as the writes left them", "after ANALYZE"):
        if state == "after ANALYZE":
            print(f"(ANALYZE; autovacuum on this server: {analyze_tables()})")
        dashboard = time_dashboard(answered=answered)
        print_dashboard(dashboard, state)
        print(f"{verdict(dashboard['page_worst_s'] <= 1 and dashboard['json_worst_s'] <= 1)}: dashboard <= 1 s, {state}")
        answered = True  # once is enough: the second timing reads the same rows


def main() -> None:
    global CONCURRENT
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=2000)
    parser.add_argument("--participants", type=int, default=None, help="default: the target (R x blocks / K)")
    parser.add_argument("--concurrent", type=int, default=CONCURRENT, help="entries at a time (the target is at 20)")
    parser.add_argument("--servers", type=int, default=None,
                        help="server processes serving them, one entry at a time each (default: the production "
                             "stack's gunicorn workers, config/gunicorn.conf.py); --servers 20 gives every entry "
                             "its own process and connection, as this bench did before 2026-11-30")
    parser.add_argument("--analysis", action="store_true",
                        help="then answer every page in bulk and time a whole analysis run with real celery workers "
                             "(needs CELERY_BROKER_URL=redis://...)")
    parser.add_argument("--workers", type=int, default=2, help="celery workers for --analysis (the target is at 2)")
    parser.add_argument("--reuse", action="store_true",
                        help="keep the study of an earlier run (no build, no entries) and time only the dashboard")
    args = parser.parse_args()
    CONCURRENT = args.concurrent
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("Set DATABASE_URL to a PostgreSQL database (the targets are PostgreSQL's).")
    setup_django()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    if args.reuse:
        from surveys.models import Participant

        if not Participant.objects.filter(study__slug=SLUG).exists():
            sys.exit(f"--reuse: no participants of {SLUG} in this database; run once without --reuse first.")
        time_dashboards(answered=args.analysis)
        return
    built = prepare(args.prompts)
    print(f"study: {built['blocks']} blocks, k={K}, r={R}, target {built['target']}; definition built in "
          f"{built['build_s']:.2f} s, loaded in {built['load_s']:.2f} s")
    participants = args.participants or built["target"]
    servers = args.servers or production_servers()
    entries = run_entries(participants, servers)
    print(f"entries: {entries['n']} in {entries['elapsed_s']:.1f} s, {CONCURRENT} at a time served by {servers} "
          f"processes; p50 {entries['p50_ms']:.0f} ms, p95 {entries['p95_ms']:.0f} ms, max {entries['max_ms']:.0f} ms "
          f"(load average {os.getloadavg()[0]:.2f}); in a server, without the wait for it: p50 "
          f"{entries['served_p50_ms']:.0f} ms, p95 {entries['served_p95_ms']:.0f} ms; CPU of the server processes "
          f"{entries['client_cpu_ms']:.1f} ms per entry")
    print(f"counter spread while running: max {max(entries['spreads'], default=0)} over {len(entries['spreads'])} samples; "
          f"after: {entries['final_spread']}")
    counts = check_counts()
    print(f"judgements per block from the stored visits: {counts['min']}-{counts['max']}; counters agree: "
          f"{counts['counters_agree']}; {counts['pairs_met']:,} pairs of blocks met, none more than "
          f"{counts['max_times_a_pair_met']} times")
    if args.analysis:
        answered = answer_everything()
        print(f"answers: {answered['ratings']:,} ratings and every page written in bulk in {answered['seconds']:.1f} s")
    time_dashboards(answered=args.analysis)
    if CONCURRENT != 20:
        print(f"(entries ran {CONCURRENT} at a time: the entry target is at 20)")
    print(f"{verdict(entries['p95_ms'] <= 100 and CONCURRENT >= 20)}: entry p95 {entries['p95_ms']:.0f} ms <= 100 ms at {CONCURRENT} "
          f"concurrent, served by {servers} processes")
    within = counts["max"] - counts["min"] <= 1 and max(entries["spreads"], default=0) <= 1 and counts["counters_agree"]
    print(f"{verdict(within)}: block counts within 1 while running and after {entries['n']} entries")
    if args.analysis:
        analysis = time_analysis(args.workers)
        print(f"{verdict(analysis['whole_s'] <= 30 and args.workers <= 2)}: whole analysis run "
              f"{analysis['whole_s']:.1f} s <= 30 s with {args.workers} workers ({analysis['tables']} tables; "
              f"load average {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
