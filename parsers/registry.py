"""Parsers by vLLM's names, checked once at start-up and built per request."""

from __future__ import annotations

from typing import TypeVar

from parsers.chat import ChatParser, ReasoningParser, ToolParser
from parsers.deepseek import (
    DeepSeekToolState,
    DeepSeekToolStream,
    DeepSeekUnavailable,
    DeepSeekV3Tools,
    DeepSeekV31Tools,
    deepseek_grammar,
    thinking_requested,
)
from parsers.dsml import DsmlGrammar, DsmlReasoning, DsmlReasoningState, DsmlTools, DsmlToolState
from parsers.engine import Grammar
from parsers.engine_reasoning import EngineReasoning, EngineReasoningState, thinking_from_kwargs
from parsers.glm import GlmGrammars, GlmTools, GlmToolState
from parsers.harmony import HarmonyGrammar, HarmonyState, HarmonyStream, HarmonyUnavailable
from parsers.hermes import HermesState, HermesStream, HermesTools
from parsers.kimi_k2 import KimiGrammars, KimiK2Tools, KimiToolState
from parsers.llama3_json import BOT_TOKEN, Llama3JsonState, Llama3JsonStream, Llama3JsonTools
from parsers.llama4_pythonic import Llama4PythonicState, Llama4PythonicStream, Llama4PythonicTools
from parsers.minimax import (
    AppendThinkReasoning,
    AppendThinkState,
    MiniMaxGrammar,
    MiniMaxReasoning,
    MiniMaxTools,
    MiniMaxToolState,
)
from parsers.mistral import (
    MistralGrammar,
    MistralReasoning,
    MistralReasoningState,
    MistralTools,
    MistralToolState,
)
from parsers.mistral_json import MistralJsonState, MistralJsonTools
from parsers.pythonic import PythonicState, PythonicStream, PythonicTools
from parsers.qwen3 import Qwen3Grammar, Qwen3Reasoning, Qwen3ReasoningState
from parsers.qwen3_coder import Qwen3CoderState, Qwen3CoderTools
from parsers.stream import ChatStream, ChatStreamState, ReasoningStream, ToolStream
from parsers.think import ParserUnavailable, ThinkTagReasoning, ThinkTagStream, ThinkTagStreamState
from parsers.types import ParseOptions, Vocabulary
from parsers.xlam import XlamState, XlamStream, XlamTools

REASONING_PARSERS = frozenset(
    {
        "qwen3",
        "deepseek_r1",
        "deepseek_v3",
        "deepseek_v4",
        "deepseek_v41",
        "openai_gptoss",
        "minimax_m2",
        "minimax_m2_append_think",
        "mistral",
        "kimi_k2",
        "glm45",
        "glm47",
    }
)

# Aliases map to the parser they share an implementation with.
TOOL_PARSERS = {
    "hermes": "hermes",
    "qwen3_json": "hermes",
    "qwen3_coder": "qwen3_coder",
    "qwen3_xml": "qwen3_coder",
    "xlam": "xlam",
    "pythonic": "pythonic",
    "llama4_pythonic": "llama4_pythonic",
    "llama3_json": "llama3_json",
    # vLLM registers one class under both names: Llama 4's JSON calls are Llama 3's.
    "llama4_json": "llama3_json",
    "deepseek_v3": "deepseek_v3",
    "deepseek_v31": "deepseek_v31",
    "deepseek_v32": "deepseek_v32",
    "deepseek_v4": "deepseek_v4",
    "deepseek_v41": "deepseek_v41",
    "openai": "openai",
    "minimax_m2": "minimax_m2",
    "mistral": "mistral",
    "kimi_k2": "kimi_k2",
    "glm45": "glm45",
    "glm47": "glm45",
}
_DEEPSEEK_TOOLS = frozenset({"deepseek_v3", "deepseek_v31"})

# Parsers built on vLLM's declarative engine rather than its legacy classes; the
# difference shows in how tool_choice "none" and unparsed markup are handled.
_ENGINE_BASED = frozenset(
    {
        "qwen3",
        "qwen3_coder",
        "deepseek_v32",
        "deepseek_v4",
        "deepseek_v41",
        "minimax_m2",
        "mistral",
        "kimi_k2",
        "glm45",
        "glm47",
    }
)
_MINIMAX = "minimax_m2"
_APPEND_THINK = "minimax_m2_append_think"
_MISTRAL = "mistral"
# Families whose reasoning and calls are one engine declaration (vLLM's names).
_KIMI = "kimi_k2"
_GLM = frozenset({"glm45", "glm47"})
_DSML = frozenset({"deepseek_v32", "deepseek_v4", "deepseek_v41"})
# gpt-oss's Harmony: one parser reads reasoning and calls, so neither mixes with others.
_HARMONY_REASONING = "openai_gptoss"
_HARMONY_TOOLS = "openai"


S = TypeVar("S")


def _reuse(state: object, kind: type[S]) -> S:
    """``state`` when a parser of this kind left it, else a fresh one."""
    return state if isinstance(state, kind) else kind()


class ParserConfigError(ValueError):
    """A parser flag that cannot work with this server or tokenizer."""


class ParserFactory:
    """The server's parser configuration; builds a ``ChatParser`` for each request.

    As in vLLM, the tool parser is only active with ``--enable-auto-tool-choice``;
    with neither parser active the server derenders without parsing.
    """

    def __init__(
        self,
        tool_parser: str | None,
        reasoning_parser: str | None,
        enable_auto_tools: bool,
        vocab: Vocabulary,
    ) -> None:
        if reasoning_parser is not None and reasoning_parser not in REASONING_PARSERS:
            known = ", ".join(sorted(REASONING_PARSERS))
            raise ParserConfigError(
                f"unknown --reasoning-parser {reasoning_parser!r}; choose one of: {known}"
            )
        if tool_parser is not None and tool_parser not in TOOL_PARSERS:
            known = ", ".join(sorted(TOOL_PARSERS))
            raise ParserConfigError(
                f"unknown --tool-call-parser {tool_parser!r}; choose one of: {known}"
            )
        tool = TOOL_PARSERS[tool_parser] if tool_parser is not None else None
        # As vLLM: only an active tool parser (--enable-auto-tool-choice) is checked.
        if enable_auto_tools and tool == "llama3_json" and vocab.id_of(BOT_TOKEN) is None:
            raise ParserConfigError(
                f"--tool-call-parser {tool_parser} cannot be used with this tokenizer: "
                f"it has no {BOT_TOKEN!r} token to mark tool calls."
            )
        self.reasoning_name = reasoning_parser
        self.tool_name = tool if enable_auto_tools else None
        self._grammar = Qwen3Grammar(vocab)
        self._token_text = vocab.token_text
        self._think: ThinkTagReasoning | None = None
        if reasoning_parser == "deepseek_r1":
            try:
                self._think = ThinkTagReasoning(vocab)
            except ParserUnavailable as exc:
                raise ParserConfigError(f"--reasoning-parser deepseek_r1: {exc}") from None
        elif reasoning_parser == "deepseek_v3":
            # vLLM builds deepseek_r1 only for a request that asks for thinking; without
            # the think tokens such a request reads as one without thinking.
            try:
                self._think = ThinkTagReasoning(vocab)
            except ParserUnavailable:
                self._think = None
        self._dsml_reasoning = (
            DsmlGrammar(reasoning_parser, vocab) if reasoning_parser in _DSML else None
        )
        self._dsml_tools = DsmlGrammar(tool, vocab) if tool in _DSML else None
        self._deepseek: Grammar | None = None
        if tool in _DEEPSEEK_TOOLS:
            try:
                self._deepseek = deepseek_grammar(vocab)
            except DeepSeekUnavailable as exc:
                raise ParserConfigError(f"--tool-call-parser {tool_parser}: {exc}") from None
        self._minimax = (
            MiniMaxGrammar(vocab) if _MINIMAX in (reasoning_parser, self.tool_name) else None
        )
        self._vocab = vocab
        self._harmony = self._harmony_grammar(reasoning_parser, tool, vocab)
        self._mistral = self._mistral_grammar(reasoning_parser, tool, vocab)
        self._kimi = KimiGrammars(vocab) if _KIMI in (reasoning_parser, tool) else None
        uses_glm = reasoning_parser in _GLM or tool in _GLM
        self._glm = GlmGrammars(vocab) if uses_glm else None
        active = [n for n in (self.reasoning_name, self.tool_name) if n is not None]
        self.engine_based = all(name in _ENGINE_BASED for name in active)

    @staticmethod
    def _harmony_grammar(
        reasoning: str | None, tool: str | None, vocab: Vocabulary
    ) -> HarmonyGrammar | None:
        harmony = [
            f"{flag} {name}"
            for flag, name, harmony_name in (
                ("--reasoning-parser", reasoning, _HARMONY_REASONING),
                ("--tool-call-parser", tool, _HARMONY_TOOLS),
            )
            if name == harmony_name
        ]
        if not harmony:
            return None
        other = [
            f"--reasoning-parser {reasoning}"
            if reasoning not in (None, _HARMONY_REASONING)
            else "",
            f"--tool-call-parser {tool}" if tool not in (None, _HARMONY_TOOLS) else "",
        ]
        mixed = " and ".join(o for o in other if o)
        if mixed:
            raise ParserConfigError(
                f"{mixed} cannot be combined with gpt-oss's Harmony parsers "
                f"(--reasoning-parser {_HARMONY_REASONING}, --tool-call-parser {_HARMONY_TOOLS})"
            )
        try:
            return HarmonyGrammar(vocab)
        except HarmonyUnavailable as exc:
            raise ParserConfigError(f"{harmony[0]}: {exc}") from None

    @staticmethod
    def _mistral_grammar(
        reasoning: str | None, tool: str | None, vocab: Vocabulary
    ) -> MistralGrammar | None:
        """Mistral's format for this tokenizer; vLLM refuses one without ``[TOOL_CALLS]``
        for either parser."""
        if _MISTRAL not in (reasoning, tool):
            return None
        try:
            return MistralGrammar(vocab)
        except ParserUnavailable as exc:
            flag = "--reasoning-parser" if reasoning == _MISTRAL else "--tool-call-parser"
            raise ParserConfigError(f"{flag} {_MISTRAL}: {exc}") from None

    def _mistral_tools(
        self, options: ParseOptions, id_seed: str, state: ChatStreamState | None
    ) -> MistralTools | MistralJsonTools | None:
        """Mistral's calls in the form its tokenizer writes (state kept in ``state``)."""
        grammar = self._mistral
        if grammar is None or self.tool_name != _MISTRAL:
            return None
        if grammar.json_array:
            assert grammar.tool_calls_id is not None
            json_state: MistralJsonState | None = None
            if state is not None:
                state.tools = json_state = _reuse(state.tools, MistralJsonState)
            return MistralJsonTools(options, grammar.tool_calls_id, id_seed, json_state)
        engine_state: MistralToolState | None = None
        if state is not None:
            state.tools = engine_state = _reuse(state.tools, MistralToolState)
        return MistralTools(
            grammar,
            options,
            reasoning_markup_is_text=self.reasoning_name is None,
            id_seed=id_seed,
            state=engine_state,
        )

    def _harmony_stream(self, id_seed: str, state: HarmonyState | None) -> HarmonyStream | None:
        if self._harmony is None:
            return None
        return HarmonyStream(
            self._harmony,
            reasoning=self.reasoning_name == _HARMONY_REASONING,
            tools=self.tool_name == _HARMONY_TOOLS,
            id_seed=id_seed,
            state=state,
        )

    @property
    def configured(self) -> bool:
        """Whether requests are parsed at all (vLLM: the parser factory returned one)."""
        return self.reasoning_name is not None or self.tool_name is not None

    @property
    def has_tool_parser(self) -> bool:
        return self.tool_name is not None

    def _think_parser(self, options: ParseOptions) -> ThinkTagReasoning | None:
        """The think-tag parser this request reads with (``deepseek_v3``: if it asks)."""
        if self.reasoning_name == "deepseek_v3" and not thinking_requested(options):
            return None
        return self._think

    def _engine_reasoning(
        self, options: ParseOptions, state: EngineReasoningState | None
    ) -> EngineReasoning | None:
        """Kimi K2's or GLM's reasoning, read with the grammar the request's thinking picks."""
        thinking = thinking_from_kwargs(options.chat_template_kwargs)
        if self.reasoning_name == _KIMI and self._kimi is not None:
            markers = self._kimi.of(thinking)
            return EngineReasoning(markers, options, state, last_tool_opener=True)
        if self.reasoning_name in _GLM and self._glm is not None:
            return EngineReasoning(self._glm.of(thinking), options, state)
        return None

    def _engine_tools(
        self, options: ParseOptions, id_seed: str, state: KimiToolState | GlmToolState | None
    ) -> KimiK2Tools | GlmTools | None:
        """Kimi K2's or GLM's tool calls, read with the grammar the request's thinking picks."""
        thinking = thinking_from_kwargs(options.chat_template_kwargs)
        as_text = self.reasoning_name is None
        if self.tool_name == _KIMI and self._kimi is not None:
            kimi_state = state if isinstance(state, KimiToolState) else None
            return KimiK2Tools(
                self._kimi.of(thinking),
                options,
                reasoning_markup_is_text=as_text,
                id_seed=id_seed,
                state=kimi_state,
            )
        if self.tool_name in _GLM and self._glm is not None:
            glm_state = state if isinstance(state, GlmToolState) else None
            return GlmTools(
                self._glm.of(thinking),
                options,
                reasoning_markup_is_text=as_text,
                id_seed=id_seed,
                state=glm_state,
            )
        return None

    def for_request(self, options: ParseOptions) -> ChatParser:
        harmony = self._harmony_stream("", None)
        if harmony is not None:
            return ChatParser(options, None, None, engine_based=False, harmony=harmony)
        reasoning: ReasoningParser | None = None
        if self.reasoning_name == "qwen3":
            reasoning = Qwen3Reasoning(self._grammar, options)
        elif self.reasoning_name in ("deepseek_r1", "deepseek_v3"):
            reasoning = self._think_parser(options)
        elif self._dsml_reasoning is not None:
            reasoning = DsmlReasoning(self._dsml_reasoning, options)
        elif self.reasoning_name == _MINIMAX and self._minimax is not None:
            reasoning = MiniMaxReasoning(self._minimax, options)
        elif self.reasoning_name == _APPEND_THINK:
            reasoning = AppendThinkReasoning(self._vocab)
        elif self._mistral is not None and self.reasoning_name == _MISTRAL:
            reasoning = MistralReasoning(self._mistral, options)
        else:
            reasoning = self._engine_reasoning(options, None)
        tools: ToolParser | None = self._mistral_tools(options, "", None)
        if self.tool_name == "hermes":
            tools = HermesTools()
        elif self.tool_name == "qwen3_coder":
            tools = Qwen3CoderTools(
                self._grammar, options, reasoning_markup_is_text=self.reasoning_name is None
            )
        elif self.tool_name == "xlam":
            tools = XlamTools()
        elif self.tool_name == "pythonic":
            tools = PythonicTools()
        elif self.tool_name == "llama4_pythonic":
            tools = Llama4PythonicTools()
        elif self.tool_name == "llama3_json":
            tools = Llama3JsonTools()
        elif self.tool_name == "deepseek_v3":
            tools = DeepSeekV3Tools()
        elif self.tool_name == "deepseek_v31":
            tools = DeepSeekV31Tools()
        elif self._dsml_tools is not None and self.tool_name is not None:
            tools = DsmlTools(
                self._dsml_tools, options, reasoning_markup_is_text=self.reasoning_name is None
            )
        elif self.tool_name == _MINIMAX and self._minimax is not None:
            tools = MiniMaxTools(
                self._minimax, options, reasoning_markup_is_text=self.reasoning_name is None
            )
        elif self.tool_name == _KIMI or self.tool_name in _GLM:
            tools = self._engine_tools(options, "", None)
        return ChatParser(options, reasoning, tools, engine_based=self.engine_based)

    def stream_for_request(
        self, options: ParseOptions, id_seed: str, state: ChatStreamState | None = None
    ) -> ChatStream:
        """A streamed parse of one choice, fresh or continuing from ``state``."""
        state = state if state is not None else ChatStreamState()
        if self._harmony is not None:
            state.harmony = _reuse(state.harmony, HarmonyState)
            keep = options.forces_tool_calls or (
                self.tool_name == _HARMONY_TOOLS
                and options.tool_choice == "auto"
                and bool(options.tools)
            )
            return ChatStream(
                options,
                None,
                None,
                engine_based=False,
                keep_tool_calls=keep,
                id_seed=id_seed,
                state=state,
                harmony=self._harmony_stream(id_seed, state.harmony),
            )
        reasoning: ReasoningStream | None = None
        if self.reasoning_name == "qwen3":
            state.reasoning = _reuse(state.reasoning, Qwen3ReasoningState)
            reasoning = Qwen3Reasoning(self._grammar, options, state.reasoning)
        elif self._dsml_reasoning is not None:
            state.reasoning = _reuse(state.reasoning, DsmlReasoningState)
            reasoning = DsmlReasoning(self._dsml_reasoning, options, state.reasoning)
        elif self.reasoning_name == _MINIMAX and self._minimax is not None:
            state.reasoning = _reuse(state.reasoning, DsmlReasoningState)
            reasoning = MiniMaxReasoning(self._minimax, options, state.reasoning)
        elif self.reasoning_name == _APPEND_THINK:
            state.reasoning = _reuse(state.reasoning, AppendThinkState)
            reasoning = AppendThinkReasoning(self._vocab, state.reasoning)
        elif self._mistral is not None and self.reasoning_name == _MISTRAL:
            state.reasoning = _reuse(state.reasoning, MistralReasoningState)
            reasoning = MistralReasoning(self._mistral, options, state.reasoning)
        elif (think := self._think_parser(options)) is not None:
            state.reasoning = _reuse(state.reasoning, ThinkTagStreamState)
            reasoning = ThinkTagStream(think, state.reasoning)
        elif self.reasoning_name == _KIMI or self.reasoning_name in _GLM:
            state.reasoning = _reuse(state.reasoning, EngineReasoningState)
            reasoning = self._engine_reasoning(options, state.reasoning)
        tools: ToolStream | None = self._mistral_tools(options, id_seed, state)
        if self.tool_name == "hermes":
            state.tools = _reuse(state.tools, HermesState)
            tools = HermesStream(id_seed, state.tools)
        elif self.tool_name == "qwen3_coder":
            state.tools = _reuse(state.tools, Qwen3CoderState)
            tools = Qwen3CoderTools(
                self._grammar,
                options,
                reasoning_markup_is_text=self.reasoning_name is None,
                id_seed=id_seed,
                state=state.tools,
            )
        elif self.tool_name == "xlam":
            state.tools = _reuse(state.tools, XlamState)
            tools = XlamStream(id_seed, state.tools)
        elif self.tool_name == "pythonic":
            state.tools = _reuse(state.tools, PythonicState)
            tools = PythonicStream(id_seed, state.tools, self._token_text)
        elif self.tool_name == "llama4_pythonic":
            state.tools = _reuse(state.tools, Llama4PythonicState)
            tools = Llama4PythonicStream(id_seed, state.tools, self._token_text)
        elif self.tool_name == "llama3_json":
            state.tools = _reuse(state.tools, Llama3JsonState)
            tools = Llama3JsonStream(id_seed, state.tools)
        elif self._dsml_tools is not None and self.tool_name is not None:
            state.tools = _reuse(state.tools, DsmlToolState)
            tools = DsmlTools(
                self._dsml_tools,
                options,
                reasoning_markup_is_text=self.reasoning_name is None,
                id_seed=id_seed,
                state=state.tools,
            )
        elif self.tool_name == _MINIMAX and self._minimax is not None:
            state.tools = _reuse(state.tools, MiniMaxToolState)
            tools = MiniMaxTools(
                self._minimax,
                options,
                reasoning_markup_is_text=self.reasoning_name is None,
                id_seed=id_seed,
                state=state.tools,
            )
        elif self.tool_name == _KIMI:
            state.tools = _reuse(state.tools, KimiToolState)
            tools = self._engine_tools(options, id_seed, state.tools)
        elif self.tool_name in _GLM:
            state.tools = _reuse(state.tools, GlmToolState)
            tools = self._engine_tools(options, id_seed, state.tools)
        elif self._deepseek is not None and self.tool_name is not None:
            state.tools = _reuse(state.tools, DeepSeekToolState)
            tools = DeepSeekToolStream(
                self._deepseek,
                id_seed,
                fenced=self.tool_name == "deepseek_v3",
                state=state.tools,
            )
        keep = options.forces_tool_calls or (
            tools is not None and options.tool_choice == "auto" and bool(options.tools)
        )
        return ChatStream(
            options,
            reasoning,
            tools,
            engine_based=self.engine_based,
            keep_tool_calls=keep,
            id_seed=id_seed,
            state=state,
        )
