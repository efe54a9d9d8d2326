"""ByteDance Seed-OSS: Qwen3-Coder's XML calls inside ``<seed:tool_call>``.

::

    <seed:tool_call>
    <function=get_weather>
    <parameter=city>Paris</parameter>
    <parameter=days>3</parameter>
    </function>
    </seed:tool_call>

The template writes a value inline, its tool prompt shows a multi-line value between newlines;
both are read, one leading and one trailing newline being layout (as in
:mod:`~mlxctl.api.toolcalls.qwen3_coder`, whose rules this format follows in full). Several
``<function=...>`` in one block, a blank line between them or not, are several calls. Thinking
is ``<seed:think>...</seed:think>`` (the ``seed_oss`` reasoning format), before any call.
"""

from __future__ import annotations

from typing import ClassVar

from mlxctl.api.toolcalls.qwen3_coder import Qwen3CoderParser

START = "<seed:tool_call>"
END = "</seed:tool_call>"


class SeedOssParser(Qwen3CoderParser):
    name: ClassVar[str] = "seed_oss"
    START: ClassVar[str] = START
    END: ClassVar[str] = END
    _end = END
