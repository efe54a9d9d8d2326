"""Scheduler policies with fake requests: no model, no MLX."""

from collections import deque

from mlxctl.engine.request import Request, RequestStatus
from mlxctl.engine.sampling import SamplingParams
from mlxctl.engine.scheduler import (
    MIN_PACED_TOKENS,
    SAMPLE_EVERY,
    PrefillPace,
    Scheduler,
    SchedulerConfig,
    admit,
    plan_prefill,
    prefill_budget,
    step_budget,
)
from mlxctl.engine.streams import RequestStream


def fake(rid: str, prompt_len: int = 10) -> Request:
    return Request(rid, list(range(prompt_len)), SamplingParams(), RequestStream(rid, lambda _: None), 16)


def decoding(cfg: SchedulerConfig) -> tuple[Scheduler, Request]:
    """A scheduler with one request past its prompt, decoding."""
    s = Scheduler(cfg)
    running = fake("run")
    s.add(running)
    s.schedule()
    s.start_running(running)
    return s, running


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


def test_admits_next_says_what_the_next_schedule_would_do_with_the_queue_head():
    s, _ = decoding(SchedulerConfig(max_num_seqs=2, max_prefilling=1))
    assert not s.admits_next()  # nothing waits
    s.add(fake("a"))
    assert s.admits_next()
    s.fits = s.would_fit = lambda reserves: sum(reserves) <= 16  # the head's KV would not fit beside the running one's
    assert not s.admits_next()
    assert s.schedule().prefill == [] and [r.id for r in s.waiting] == ["a"]  # and indeed it waits
    s.fits = s.would_fit = None
    s.schedule()  # "a" prefills: the limit of prompts at once is reached
    s.add(fake("b"))
    assert not s.admits_next()
    s.start_running(s.prefilling[0])  # two sequences in flight: the sequence limit holds "b"
    assert not s.admits_next()
    assert s.schedule().prefill == [] and [r.id for r in s.waiting] == ["b"]


def test_admits_next_looks_past_suspects_held_back_as_schedule_does():
    s, running = decoding(SchedulerConfig(max_num_seqs=8, max_prefilling=4))
    s.one_at_a_time = {running.id, "s2"}  # a suspect decodes: the next suspect waits
    s.add(fake("s2"))
    claims = []
    s.fits = s.would_fit = lambda reserves: claims.append(len(reserves)) or True
    assert not s.admits_next() and claims == []  # only a held suspect waits: nothing to admit, no claim asked
    s.add(fake("b"))
    assert s.admits_next() and claims == [2]  # "b" goes ahead of it, beside the running one
    s.schedule()
    assert [r.id for r in s.prefilling] == ["b"] and [r.id for r in s.waiting] == ["s2"]
    assert claims == [2, 2]  # schedule asked for room for "b" alone, not for the held suspect


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
    # the third short prompt fits a step: it waits for the next rather than being split, and
    # the long one takes what is left
    assert plan == {long: 112, shorts[0]: 200, shorts[1]: 200}


def test_plan_prefill_runs_as_many_whole_prompts_of_a_burst_as_fit():
    burst = [fake(str(i), 300) for i in range(8)]
    assert plan_prefill(burst, 2048) == [(r, 300) for r in burst[:6]]  # the 7th waits to go whole
    started = fake("started", 600)
    started.num_prefilled = 50  # already split once (its first piece when the budget was smaller)
    assert plan_prefill([*burst[:6], started], 2048) == [(r, 300) for r in burst[:6]] + [(started, 248)]
    hit = fake("hit", 624)
    hit.num_prefilled = hit.num_reused = 24  # a prefix-cache hit has not started it: it waits to go whole
    assert plan_prefill([*burst[:6], hit], 2048) == [(r, 300) for r in burst[:6]]
    big = fake("big", 3000)  # too long for any step: it takes a share and what is left
    assert plan_prefill([big, *burst[:2]], 2048) == [(big, 1448), (burst[0], 300), (burst[1], 300)]


def test_a_prompt_that_cannot_go_whole_beside_a_long_one_is_split_not_held_back():
    long, mid = fake("long", 5000), fake("mid", 300)
    # 300 fits a 512-token step, but beside the long prompt's share (256) a step never has room
    # for it whole: it takes what is left at once instead of waiting for the long one to finish
    assert plan_prefill([long, mid], 512) == [(long, 256), (mid, 256)]
    small = fake("small", 200)  # fits beside the share: it goes whole, and the long one takes the rest
    assert plan_prefill([long, small], 512) == [(long, 312), (small, 200)]


def test_plan_prefill_budget_under_the_count_goes_to_the_shortest():
    reqs = [fake(str(i), 50 + i) for i in range(4)]
    assert plan_prefill(reqs, 2) == [(reqs[0], 2)]


def test_prefill_budget_counts_decode_rows_down_to_half_the_chunk():
    assert prefill_budget(512, 0) == 512
    assert prefill_budget(512, 16) == 496
    assert prefill_budget(8, 16) == 4
    assert prefill_budget(1, 3) == 1


def test_pace_fits_the_target_at_the_measured_cost_following_the_latest_chunks():
    pace = PrefillPace(0.5)
    assert pace.limit() is None  # nothing measured yet
    pace.record(512, 1.024)  # 2 ms a token
    assert pace.limit() == 250
    pace.record(100, 0.6)  # dearer now (6 ms): the average moves halfway
    assert pace.limit() == 125
    pace.record(0, 1.0)  # nothing to learn from
    pace.record(10, 0.0)
    assert pace.limit() == 125
    pace.record(10, 10.0)  # a second a token: never below the floor
    assert pace.limit() == MIN_PACED_TOKENS
    assert PrefillPace(0).limit() is None and PrefillPace(0.0).per_token_s is None


def test_pace_times_a_queued_step_first_then_one_in_sample_every():
    pace = PrefillPace(0.5)
    assert pace.wants_sample()  # nothing measured yet
    pace.record(100, 0.1)
    assert [pace.wants_sample() for _ in range(SAMPLE_EVERY)] == [False] * (SAMPLE_EVERY - 1) + [True]
    pace.record(100, 0.1)
    assert not pace.wants_sample()
    off = PrefillPace(0)
    assert not off.wants_sample()
    off.record(100, 0.1)
    assert off.per_token_s is None


def test_step_budget_is_paced_only_while_rows_decode():
    cfg = SchedulerConfig(prefill_chunk=512, prefill_step_ms=100)
    pace = PrefillPace(0.1)
    assert step_budget(cfg, 4, pace) == 508  # not measured yet: the chunk rule alone
    pace.record(100, 1.0)  # 10 ms a token: 10 fit in 100 ms, the floor is more
    assert step_budget(cfg, 4, pace) == MIN_PACED_TOKENS
    assert step_budget(cfg, 0, pace) == 512  # no one waits for a token
    cheap = PrefillPace(0.1)
    cheap.record(1000, 0.01)  # 10 us a token: 10,000 would fit, the chunk rule binds
    assert step_budget(cfg, 4, cheap) == 508
    assert step_budget(cfg, 4, PrefillPace(0)) == 508  # off


def test_schedule_paces_a_long_prompt_while_another_decodes():
    s, running = decoding(SchedulerConfig(prefill_chunk=512, prefill_step_ms=50))
    s.add(fake("long", 5000))
    assert [n for _, n in s.schedule().prefill] == [511]
    s.pace.record(511, 5.11)  # 10 ms a token
    assert [n for _, n in s.schedule().prefill] == [MIN_PACED_TOKENS]
    s.finish(running)
    assert [n for _, n in s.schedule().prefill] == [512]


def test_paced_step_lets_fresh_short_prompts_ride_whole_up_to_the_chunk():
    wave = [fake(f"w{i}", 150) for i in range(8)]
    assert plan_prefill(wave, 200) == [(wave[0], 150)]  # the pace alone: one a step
    assert plan_prefill(wave, 200, whole_up_to=2048) == [(r, 150) for r in wave]  # the wave goes at once
    assert plan_prefill(wave, 200, whole_up_to=500) == [(r, 150) for r in wave[:3]]  # bounded by the chunk
    assert plan_prefill(wave, 200, whole_up_to=200) == [(wave[0], 150)]  # nothing over the pace: as before


def test_riders_never_include_long_or_started_prompts_and_the_long_one_keeps_its_pace():
    long, short, big = fake("long", 7600), fake("short", 100), fake("big", 300)
    started = fake("started", 150)
    started.num_prefilled = 40  # its first piece went in an earlier step: it stays on the pace
    hit = fake("hit", 150)
    hit.num_prefilled = hit.num_reused = 24  # a prefix-cache hit alone has not started it: it may ride
    plan = dict(plan_prefill([long, big, started, hit, short], 200, whole_up_to=4096))
    # the pace's 200: the long one's share, the short one whole, the started one what is left;
    # then the hit rides whole; "big" (longer than the pace allows) waits for its share
    assert plan == {long: 40, short: 100, started: 60, hit: 126}


def test_schedule_lets_a_wave_of_short_prompts_in_beside_decoding_rows():
    s, _ = decoding(SchedulerConfig(prefill_chunk=2048, prefill_step_ms=100))
    s.pace.record(100, 0.5)  # 5 ms a token: 20 fit in 100 ms
    wave = [fake(f"w{i}", 18) for i in range(6)]
    for r in wave:
        s.add(r)
    assert [(r.id, n) for r, n in s.schedule().prefill] == [(r.id, 18) for r in wave]
    s.add(fake("long", 5000))
    s.prefilling[:] = [r for r in s.prefilling if r.id == "long"]
    assert [n for _, n in s.schedule().prefill] == [20]  # a long prompt's piece keeps to the pace


def test_schedule_sends_a_wave_whole_up_to_ride_chunks_even_with_nothing_decoding():
    s = Scheduler(SchedulerConfig(prefill_chunk=512, max_prefilling=8))
    wave = [fake(f"w{i}", 150) for i in range(8)]
    for r in wave:
        s.add(r)
    assert [n for _, n in s.schedule().prefill] == [150] * 8  # 1200 tokens: past one chunk, within RIDE_CHUNKS
    s2 = Scheduler(SchedulerConfig(prefill_chunk=512, max_prefilling=8))
    long = fake("long", 5000)
    for r in (long, *wave[:2]):
        s2.add(r)
    # beside a long prompt the chunk is shared as before: its piece and the short ones whole
    assert [(r.id, n) for r, n in s2.schedule().prefill] == [("long", 212), ("w0", 150), ("w1", 150)]


def test_schedule_decodes_running_while_a_long_prompt_prefills():
    s, running = decoding(SchedulerConfig(prefill_chunk=64))
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


def test_auto_settings_by_backend_keep_what_was_given():
    from mlxctl.engine.scheduler import CPU_STEP_MS, resolve_auto

    auto = resolve_auto(SchedulerConfig())  # the tests run on MLX's CPU backend
    assert (auto.prefill_chunk, auto.prefill_step_ms) == (512, CPU_STEP_MS)
    given = resolve_auto(SchedulerConfig(prefill_chunk=64, prefill_step_ms=0))
    assert (given.prefill_chunk, given.prefill_step_ms) == (64, 0)
    assert resolve_auto(SchedulerConfig(prefill_step_ms=300)).prefill_step_ms == 300
