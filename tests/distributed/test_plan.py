"""What is checked before a model is split: the plan, the group, the messages and the CLI."""

from __future__ import annotations

import dataclasses
import queue

import pytest

from mlxctl.cli.tensor_parallel import check_serve_options
from mlxctl.distributed.group import launched_rank, tensor_group
from mlxctl.distributed.lockstep import _take, _wire
from mlxctl.distributed.plan import shard_plan, supports_sharding
from mlxctl.engine.request import Request
from mlxctl.engine.sampling import SamplingParams
from mlxctl.errors import BadInputError
from mlxctl.models.dummy import LLAMA_3_2_1B, QWEN3_MOE_SMALL, SMOLLM2_135M
from tests.cli.helpers import run_cli


def test_llama_splits_heads_and_mlp_evenly():
    plan = shard_plan(LLAMA_3_2_1B, 2)
    assert plan.per_rank == {"num_attention_heads": 16, "num_key_value_heads": 4, "intermediate_size": 4096}
    assert "llama over 2 ranks" in plan.describe()
    assert shard_plan(QWEN3_MOE_SMALL, 4).per_rank["moe_intermediate_size"] == 96


def test_a_dimension_that_does_not_divide_is_named():
    with pytest.raises(BadInputError, match=r"num_attention_heads \(9\) does not divide by 2"):
        shard_plan(SMOLLM2_135M, 2)
    assert shard_plan(SMOLLM2_135M, 3).per_rank["num_key_value_heads"] == 1


def test_architectures_without_a_plan_and_vision_models_are_refused():
    assert supports_sharding("llama") and supports_sharding("qwen3_moe")
    assert not supports_sharding("phi3") and not supports_sharding("no_such_arch")
    with pytest.raises(BadInputError, match="cannot shard 'phi3'"):
        shard_plan({"model_type": "phi3", "num_attention_heads": 32}, 2)
    with pytest.raises(BadInputError, match="vision models"):
        shard_plan({"model_type": "llava", "vision_config": {}, "text_config": {"model_type": "llama"}}, 2)


def test_a_lone_process_is_not_a_group_of_two(monkeypatch):
    assert tensor_group(1) is None
    with pytest.raises(BadInputError, match="needs 2 ranks, but this is a process of its own") as err:
        tensor_group(2)
    assert "mlx.launch -n 2" in err.value.hint
    with pytest.raises(BadInputError, match="at least 1"):
        tensor_group(0)
    monkeypatch.setenv("MLX_RANK", "3")
    assert launched_rank() == 3


def test_serve_refuses_what_it_cannot_split():
    check_serve_options(1, extra_models=2, cache_dir="/tmp/x")  # one rank: anything goes
    with pytest.raises(BadInputError, match="serves one model"):
        check_serve_options(2, extra_models=1, cache_dir=None)
    with pytest.raises(BadInputError, match="--cache-dir"):
        check_serve_options(2, extra_models=0, cache_dir="/tmp/x")
    with pytest.raises(BadInputError, match="--prefill-step-ms does not work with --tensor-parallel"):
        check_serve_options(2, extra_models=0, cache_dir=None, prefill_step_ms=300)
    check_serve_options(2, extra_models=0, cache_dir=None, prefill_step_ms=0)  # off, as the ranks run anyway
    check_serve_options(2, extra_models=0, cache_dir=None)  # left to the backend: the ranks do not pace


def _request(rid: str, params: SamplingParams) -> Request:
    return Request(rid, [1, 2, 3], params, stream=None, max_new_tokens=5, cache_salt="s")


def test_inbox_messages_go_out_as_plain_data_with_every_seed_chosen():
    unseeded, seeded = _request("a", SamplingParams(temperature=0.7)), _request("b", SamplingParams(seed=5))
    wire = _wire("add", unseeded)
    assert wire[:2] == ("add", "a") and wire[2] == [1, 2, 3] and wire[4:] == (5, "s")
    assert wire[3].seed is not None and unseeded.params.seed == wire[3].seed  # the leader samples with it too
    assert dataclasses.replace(wire[3], seed=None) == SamplingParams(temperature=0.7)
    assert _wire("add", seeded)[3].seed == 5
    assert _wire("abort", "a") == ("abort", "a")
    assert _wire("clear_prefix_cache", (object(), True)) == ("clear_prefix_cache", True)


def test_a_turn_takes_the_whole_inbox_up_to_a_stop():
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    assert _take(inbox, block=False) == []
    for message in [("abort", "x"), ("stop", None), ("abort", "late")]:
        inbox.put(message)
    assert _take(inbox, block=False) == [("abort", "x"), ("stop", None)]


def test_cli_without_mlx_launch_says_how_to_start_it():
    result = run_cli("serve", "--tensor-parallel", "2", "--load-format", "dummy")
    assert result.returncode != 0
    assert "needs 2 ranks" in result.stderr and "mlx.launch -n 2" in result.stderr
    assert "Traceback" not in result.stderr


def test_rank0_is_looked_for_where_the_launcher_said_then_on_loopback(tmp_path, monkeypatch):
    from mlxctl.distributed.doorbell import rank0_addresses

    hostfile = tmp_path / "hosts.json"
    hostfile.write_text('[["10.0.0.5:5000", "10.0.1.5:5001"], ["10.0.0.6:5000"]]')  # mlx.launch's ring layout
    monkeypatch.setenv("MLX_HOSTFILE", str(hostfile))
    monkeypatch.setenv("NCCL_HOST_IP", "192.168.1.2")
    assert rank0_addresses() == ["192.168.1.2", "10.0.0.5", "10.0.1.5", "127.0.0.1"]
    monkeypatch.delenv("NCCL_HOST_IP")
    monkeypatch.setenv("MLX_HOSTFILE", str(tmp_path / "missing.json"))
    monkeypatch.setenv("MLX_JACCL_COORDINATOR", "10.9.9.9:32323")
    assert rank0_addresses() == ["10.9.9.9", "127.0.0.1"]
