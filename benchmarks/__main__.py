"""`make bench`: every fork-vs-stock benchmark in one table, also written to docs/benchmarks.md.

`python -m benchmarks [name ...]` runs the named ones only (parallel_handoff, deferred_handoff,
nova_sonic_handoff, caller_wait, long_run, build_speed). Each compared benchmark runs fork, stock,
fork, stock... `BENCH_REPEATS` times (default 3) and the table shows the medians.
"""

from __future__ import annotations

import contextlib
import io
import os
import platform
import subprocess
import sys
import time

from benchmarks._compare import ROOT, compare

REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
"""Alternating fork/stock runs per benchmark; the table shows medians."""

COMPARED = {
    "parallel_handoff": {
        "parallel/single": "fork <= 1.05",
        "leaving_llm_calls_after_batch": "fork 0, stock 1",
        "fresh_leaving_llm_calls_after_batch": "1 on both: the leaving agent voices them",
    },
    "deferred_handoff": {"tool_return_to_on_enter_s": "fork <= 0.010, stock inf"},
    "nova_sonic_handoff": {
        "tool_return_to_first_request_s": "fork <= 0.050 (no fixed sleeps), stock ~1.75 of sleeps"
    },
    "caller_wait": {
        "during_handoff_turn_s": "fork finite, stock inf (the turn is dropped)",
        "after/no_handoff": "fork <= 1.05",
    },
    "long_run": {
        "handoff_last/first": "<= 1.2",
        "handoff_mem_growth_kib": "bounded",
        "activities_alive_after_handoffs": "<= 2, whatever the count of handoffs",
        "speech_handles_beyond_event_record": "0",
        "turns_500_wall_s": "fork/stock <= 1.03 (1.00 +- 0.03, below is faster)",
    },
}


NOTES = """
## Reading the figures

* `parallel/single` builds the arriving agent with the leaving agent's context, the documented
  pattern #5150's fix is for: the fork hands off without the leaving agent's extra round trip.
  `fresh_*` builds it with no context: it starts afresh, so on both builds the leaving agent voices
  the siblings' results as the end of its turn (one more request, about the model's 100 ms).
* `caller_wait` is the caller's side of a handoff, spoken through the session's audio input, VAD
  and STT: from the final transcript of a turn to the first audio frame of its answer (FakeTTS into
  an audio output that timestamps frames; medians of 5 sessions, 5 turns each for the plain ones).
  `during_handoff_turn_s` is a turn that ends while the desk is in its `on_exit` (released as the
  turn ends), answered by billing: stock drops it (`inf`, nothing within 0.5 s). `after/no_handoff` is
  a turn right after the handoff over one with no handoff, on the same session; a few ms each, so a
  busy machine moves it by several percent either way.
* `handoff_last/first` is the mean time of the last 100 of 1,000 sequential handoffs over the first
  100. Patch 0006 took the fork from about 1.35 to about 1.0: recording each tool call scanned the
  whole session history. `turns_500_wall_s` is 500 ordinary turns with a tool call and no handoff;
  its fork/stock ratio has measured between 0.87 and 1.01 from one `make bench` to the next (the
  machine's load moves it more than the patches do), so the goal is read as a ceiling.
* `activities_alive_after_handoffs`: stock keeps every closed `AgentActivity` of the session alive
  (1,001 after 1,000 handoffs). Patch 0015 lets them go: what is left is the current activity and
  the one before it, held by the last handoff's finished task until the next handoff.
* `speech_handles_alive_after_handoffs` is 1,000 on both builds, by design: the session records
  every event for its session report (`AgentSession._recorded_events`), `SpeechCreatedEvent` with
  its speech handle included. `speech_handles_beyond_event_record` counts the ones alive for any
  other reason; 0 is the goal. On stock those recorded speech handles were what kept the closed
  activities alive (through their finished tasks), which 0015 ends.
* `handoff_mem_growth_kib` (tracemalloc, handoffs 100-1,000) is the growth over 900 handoffs. What
  is left on the fork is the session's own record, which grows with the conversation on any build:
  its history (five chat items per handoff here) and its event record (ten events per handoff).
* `tasks_alive_after_handoffs`: the session's own two long-running tasks.
* `tool_return_to_first_request_s` (`nova_sonic_handoff`): a Nova Sonic 2 handoff with a 50-item
  history, from the handing-off tool's return to the arriving agent's first generation request
  (its `on_enter` greeting) on its new Bedrock connection, on the recording fake of the stream,
  which answers at once. Stock spends fixed sleeps in `RealtimeSession.initialize_streams()`:
  0.5 s for an agent without tools, 0.01 s after each history event (three per message, 40
  messages kept) and 0.05 s before the session is marked active. Until the aws patches drop
  them the fork measures the same; with them stubbed out it is about 0.011 s.
"""


def main() -> None:
    chosen = sys.argv[1:] or [*COMPARED, "build_speed"]
    out = io.StringIO()
    for name in chosen:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            if name == "build_speed":
                proc = subprocess.run(
                    [sys.executable, "-m", "benchmarks.build_speed"], cwd=ROOT, capture_output=True, text=True
                )
                print(proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 else proc.stderr)
            else:
                compare(f"benchmarks.{name}", COMPARED[name], repeats=REPEATS)
        print(buf.getvalue(), end="")
        out.write(buf.getvalue() + "\n")
    doc = ROOT / "docs" / "benchmarks.md"
    doc.parent.mkdir(exist_ok=True)
    doc.write_text(
        "# Benchmarks, fork vs stock\n\n"
        f"`make bench` on a {platform.machine()} machine, Python "
        f"{platform.python_version()}, {time.strftime('%Y-%m-%d', time.gmtime())}. Fork and stock run "
        "alternately in the same invocation (medians of BENCH_REPEATS runs); absolute times depend on the machine and its "
        "load, the ratios are what we track.\n\n```\n" + out.getvalue().rstrip() + "\n```\n" + NOTES
    )
    print(f"written to {doc.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
