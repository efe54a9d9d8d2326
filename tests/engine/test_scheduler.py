"""Scheduler policies with fake requests: no model, no MLX."""

from collections import deque

from mlxctl.engine.request import Request, RequestStatus
from mlxctl.engine.sampling import SamplingParams
from mlxctl.engine.scheduler import Scheduler, SchedulerConfig, admit, plan_prefill, prefill_budget
from mlxctl.engine.streams import RequestStream


def fake(rid: str, prompt_len: int = 10) -> Request:
    return Request(rid, list(range(prompt_len)), SamplingParams(), RequestStream(rid, lambda _: None), 16)


def test_admit_is_fifo_and_bounded_by_prefill_slots():
    waiting = deque(fake(str(i)) for i in range(5))
    got = admit(waiting, [], [], SchedulerConfig(max_num_seqs=16, max_prefilling=2))
    assert [r.id for r in got] == ["0", "1"]
    assert [r.id for r in waiting] == ["2", "3", "4"]


def test_admit_respects_max_num_seqs_counting_running():
    waiting = deque(fake(str(i)) for i in range(3))
    running = [fake(f"r{i}") for i in range(3)]
    got = admit(waiting, [], running, SchedulerConfig(max_num_seqs=4, max_prefilling=4))
    assert [r.id for r in got] == ["0"]


def test_plan_prefill_chunks_long_prompt_and_leaves_a_short_ones_share_to_it():
    a, b = fake("a", 1000), fake("b", 30)
    assert plan_prefill([a], 512) == [(a, 512)]
    assert plan_prefill([a, b], 512) == [(a, 482), (b, 30)]  # b is done this step, a takes the rest
    a.num_prefilled = 990
    assert plan_prefill([a, b], 512) == [(a, 10), (b, 30)]


def test_plan_prefill_keeps_the_oldest_a_share_and_gives_the_rest_shortest_first():
    a, b, c = fake("a", 1000), fake("b", 900), fake("c", 100)
    assert plan_prefill([a, b, c], 512) == [(a, 170), (b, 242), (c, 100)]


def test_plan_prefill_never_starves_the_oldest_when_short_prompts_fill_the_budget():
    long, shorts = fake("long", 5000), [fake(f"s{i}", 200) for i in range(7)]
    plan = dict(plan_prefill([long, *shorts], 512))
    assert plan[long] == 64 and plan[shorts[0]] == plan[shorts[1]] == 200 and plan[shorts[2]] == 48


def test_plan_prefill_runs_as_many_whole_prompts_of_a_burst_as_fit():
    burst = [fake(str(i), 300) for i in range(8)]
    assert plan_prefill(burst, 2048) == [(r, 300) for r in burst[:6]] + [(burst[6], 248)]


def test_plan_prefill_budget_under_the_count_goes_to_the_shortest():
    reqs = [fake(str(i), 50 + i) for i in range(4)]
    assert plan_prefill(reqs, 2) == [(reqs[0], 2)]


def test_prefill_budget_counts_decode_rows_down_to_half_the_chunk():
    assert prefill_budget(512, 0) == 512
    assert prefill_budget(512, 16) == 496
    assert prefill_budget(8, 16) == 4
    assert prefill_budget(1, 3) == 1


def test_schedule_decodes_running_while_a_long_prompt_prefills():
    s = Scheduler(SchedulerConfig(prefill_chunk=64))
    running = fake("run")
    s.add(running)
    s.schedule()
    s.start_running(running)
    s.add(fake("long", 1000))
    plan = s.schedule()
    assert plan.decode == [running]
    assert [(r.id, n) for r, n in plan.prefill] == [("long", 63)]  # the decode row counts one token


def test_finish_removes_from_every_queue():
    s = Scheduler(SchedulerConfig())
    reqs = [fake(str(i)) for i in range(3)]
    for r in reqs:
        s.add(r)
    s.schedule()
    s.start_running(reqs[0])
    for r in reqs:
        s.finish(r)
        assert r.status is RequestStatus.FINISHED
    assert not s.has_work
    assert s.find("0") is None
