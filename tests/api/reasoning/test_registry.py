"""Parser registry, template detection, prompts that open thinking, and the thinking budget."""

from __future__ import annotations

import pytest

from mlxctl.api.reasoning import (
    ReasoningParser,
    ThinkingBudget,
    detect_parser,
    get_parser,
    names,
    prompt_opens_reasoning,
)
from mlxctl.errors import BadInputError


def test_names_and_get_parser():
    assert names() == ["think", "deepseek_r1", "gpt_oss", "mistral", "granite", "seed_oss", "gemma4"]
    for name in names():
        parser = get_parser(name)
        assert issubclass(parser, ReasoningParser)
        assert parser.name == name
        assert parser.end_marker and parser.closing_text


def test_unknown_parser_names_the_known_ones():
    with pytest.raises(BadInputError) as caught:
        get_parser("qwen9")
    assert "qwen9" in caught.value.message
    for name in names():
        assert name in caught.value.message


# Representative pieces of real templates (abridged).
QWEN3 = (
    "{%- if enable_thinking is defined and enable_thinking is false %}\n"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1] %}"
    "{{- '<|im_start|>assistant\\n' }}"
)
QWQ = "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}"
DEEPSEEK_R1 = (
    "{% set content = message['content'] %}{% if '</think>' in content %}"
    "{% set content = content.split('</think>')[-1] %}{% endif %}"
    "<｜Assistant｜>{{content}}<｜end▁of▁sentence｜>"
    "{%- if add_generation_prompt %}<｜Assistant｜><think>\\n{% endif -%}"
)
DEEPSEEK_V31 = (
    "{% if not thinking is defined %}{% set thinking = false %}{% endif %}"
    "{%- if add_generation_prompt %}{%- if not thinking %}{{'<｜Assistant｜></think>'}}"
    "{%- else %}{{'<｜Assistant｜><think>'}}{%- endif %}{% endif %}"
)
GPT_OSS = (
    "{{- '<|start|>assistant<|channel|>analysis<|message|>' + message.thinking + '<|end|>' }}"
    "{%- if add_generation_prompt -%}<|start|>assistant{%- endif -%}"
)
MAGISTRAL = (
    "{%- set default_system_message = 'First draft your thinking process ... [THINK]your thoughts[/THINK]"
    " then the answer.' %}[SYSTEM_PROMPT]{{ default_system_message }}[/SYSTEM_PROMPT]"
)
GRANITE = (
    "{%- set system_message = system_message + \" Write your thoughts after 'Here is my thought process:' and"
    " write your response after 'Here is my response:' for each user query.\" %}"
)
LLAMA = "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
SEED_OSS = (  # its thinking-budget branch; it also splits on </think>, so <seed:think> is checked first
    "{%- if thinking_budget == 0 %}{{ '<seed:bos>assistant\\n<seed:think><seed:cot_budget_reflect>The current "
    "thinking budget is 0, so I will directly start answering the question.</seed:cot_budget_reflect>\\n"
    "</seed:think>' }}{%- else %}{{ '<seed:bos>assistant\\n' }}{%- endif %}"
    "{%- set reasoning = message.content.split('</think>')[0] %}"
)
MINIMAX_M2 = (
    "{%- if '</think>' in content %}{%- set reasoning_content = content.split('</think>')[0] %}{%- endif %}"
    "{%- if add_generation_prompt -%}{{- ']~b]ai' ~ '\\n' ~ '<think>' ~ '\\n' }}{%- endif -%}"
)
NEMOTRON = (  # Nemotron-Nano-9B-v2: thinking on unless the system prompt says /no_think
    "{%- if '/no_think' in system_content -%}{%- set thinking = false -%}{%- endif -%}"
    "{%- if add_generation_prompt -%}{%- if thinking -%}{{- '<SPECIAL_11>Assistant\\n<think>\\n' -}}"
    "{%- else -%}{{- '<SPECIAL_11>Assistant\\n<think></think>' -}}{%- endif -%}{%- endif -%}"
)
DEEPSEEK_V32 = (  # a community template of DeepSeek's V3.2 encoder (thinking_mode "thinking" or "chat")
    "{%- if thinking is defined and thinking -%}{{- '<｜Assistant｜><think>' -}}{%- else -%}"
    "{{- '<｜Assistant｜></think>' -}}{%- endif -%}{{- '<' + '｜DSML｜' + 'function_calls>' -}}"
)
GEMMA4 = (
    "{%- if enable_thinking is defined and enable_thinking -%}{{- '<|think|>\\n' -}}{%- endif -%}"
    "{{- '<|turn>model\\n' -}}{%- if message.tool_calls -%}{{- '<|tool_call>call:' + name -}}{%- endif -%}"
    "{%- if add_generation_prompt and not enable_thinking -%}{{- '<|channel>thought\\n<channel|>' -}}{%- endif -%}"
)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (QWEN3, "think"),
        (QWQ, "think"),
        (DEEPSEEK_R1, "deepseek_r1"),
        (DEEPSEEK_V31, "think"),
        (GPT_OSS, "gpt_oss"),
        (MAGISTRAL, "mistral"),
        (GRANITE, "granite"),
        (SEED_OSS, "seed_oss"),
        (MINIMAX_M2, "think"),
        (NEMOTRON, "think"),
        (LLAMA, None),
        (GEMMA4, "gemma4"),
        (DEEPSEEK_V32, "think"),
        ("", None),
        (None, None),
    ],
    ids=["qwen3", "qwq", "deepseek_r1", "deepseek_v31", "gpt_oss", "magistral", "granite", "seed_oss", "minimax_m2",
         "nemotron", "llama", "gemma4", "deepseek_v32", "empty", "none"],
)
def test_detect_parser(template, expected):
    assert detect_parser(template) == expected


@pytest.mark.parametrize(
    ("name", "prompt", "expected"),
    [
        ("think", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n", True),
        ("think", "<|im_start|>assistant\n<think>", True),
        ("think", "<|im_start|>assistant\n<think>\n\n</think>\n\n", False),  # Qwen3, thinking off
        ("think", "<|im_start|>assistant\n", False),
        ("think", "<|im_start|>user\nWhat is <think>?<|im_end|>\n<|im_start|>assistant\n", False),
        ("deepseek_r1", "<｜User｜>hi<｜Assistant｜><think>\n", True),
        ("deepseek_r1", "<｜User｜>hi<｜Assistant｜>", False),
        ("gpt_oss", "<|start|>user<|message|>hi<|end|><|start|>assistant", False),
        ("gpt_oss", "<|start|>user<|message|>hi<|end|><|start|>assistant<|channel|>analysis<|message|>", True),
        ("mistral", "[SYSTEM_PROMPT]use [THINK]...[/THINK][/SYSTEM_PROMPT][INST]hi[/INST]", False),
        ("mistral", "[INST]hi[/INST][THINK]", True),
        ("granite", "<|start_of_role|>assistant<|end_of_role|>", False),
        ("seed_oss", "<seed:bos>user\nhi<seed:eos><seed:bos>assistant\n", False),
        ("seed_oss", "<seed:bos>assistant\n<seed:think>", True),
        ("seed_oss", "<seed:bos>assistant\n<seed:think><seed:cot_budget_reflect>budget 0</seed:cot_budget_reflect>\n"
                     "</seed:think>", False),  # a budget of 0: closed in the prompt
        ("think", "]~b]user\nhi[e~[\n]~b]ai\n<think>\n", True),  # MiniMax-M2 opens thinking in the prompt
        ("think", "<SPECIAL_11>Assistant\n<think></think>", False),  # Nemotron-Nano-9B-v2 with /no_think
        ("gemma4", "<|turn>user\nhi<turn|>\n<|turn>model\n", False),
        ("gemma4", "<|turn>model\n<|channel>thought\n<channel|>", False),  # thinking off: an empty channel
        ("gemma4", "<|turn>model\n<|channel>thought\n", True),
    ],
)
def test_prompt_opens_reasoning(name, prompt, expected):
    assert prompt_opens_reasoning(name, prompt) is expected


def test_prompt_opens_reasoning_unknown_parser():
    with pytest.raises(BadInputError):
        prompt_opens_reasoning("nope", "<think>")


def test_thinking_budget_counts_to_the_limit():
    budget = ThinkingBudget(3, "think")
    assert budget.closing_text == "\n</think>\n\n"
    assert not budget.exceeded and budget.remaining == 3
    assert budget.on_token() is False
    assert budget.on_token() is False
    assert budget.on_token() is True
    assert budget.exceeded and budget.remaining == 0
    assert ThinkingBudget(0, "think").exceeded


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True])
def test_thinking_budget_rejects_bad_sizes(bad):
    with pytest.raises(BadInputError):
        ThinkingBudget(bad, "think")


def test_thinking_budget_unknown_parser():
    with pytest.raises(BadInputError):
        ThinkingBudget(10, "nope")


@pytest.mark.parametrize("name", names())
def test_closing_text_closes_thinking(name):
    """What the server does when the budget runs out: the closing text goes into the output."""
    budget = ThinkingBudget(2, name)
    parser = get_parser(name)(starts_in_reasoning=True)
    reasoning = content = ""
    for token in ["Let", " me think"]:
        assert parser.in_reasoning
        delta = parser.feed(token)
        reasoning += delta.reasoning
        content += delta.content
        budget.on_token()
    assert budget.exceeded
    for piece in [budget.closing_text, "The answer."]:
        delta = parser.feed(piece)
        reasoning += delta.reasoning
        content += delta.content
    assert not parser.in_reasoning
    delta = parser.finish()
    reasoning += delta.reasoning
    content += delta.content
    assert reasoning.strip() == "Let me think"
    assert content.strip() == "The answer."
    assert parser.end_marker in budget.closing_text
