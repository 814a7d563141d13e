"""The one registry of position encodings: the model's position flags, their help, choices and defaults come from here.

An entry is declared where its mechanism lives, with `@register_position(name, sites=..., paper=..., help=...,
options=...)` on the class. `sites` says where it can act:

    INPUT          added to the token embeddings (absolute positions: `--absolute-positions`)
    ENCODER_SELF   encoder self-attention            (`--self-attn-pos`, or `--encoder-self-attn-pos`)
    DECODER_SELF   causal decoder self-attention     (`--self-attn-pos`, or `--decoder-self-attn-pos`)
    CROSS          decoder-to-encoder attention      (`--cross-attn-pos`)

`options` are `Option`s: one flag each (`--rel-span`, `--rope-theta`, ...), declared once and shared by every entry
that lists the same object. Attention-site classes are built as `cls(embed_dim=, num_heads=, causal=, **options)`,
input-site classes as `cls(embed_dim=, padding_idx=, scaling=, **options)` (options under their `param` names).
"""
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, Iterable, Optional, Tuple

from fairseq_compgen.errors import UsageError

INPUT, ENCODER_SELF, DECODER_SELF, CROSS = "input", "encoder-self", "decoder-self", "cross"
ATTENTION_SITES = (ENCODER_SELF, DECODER_SELF, CROSS)


@dataclass(frozen=True)
class Option:
    """One option of an encoding: flag `--{dest with - for _}`, passed to the constructor as `param`."""

    dest: str
    param: str
    type: Callable[[Any], Any]
    default: Any
    help: str
    metavar: Optional[str] = None

    @property
    def flag(self) -> str:
        return "--" + self.dest.replace("_", "-")


@dataclass(frozen=True)
class Encoding:
    name: str
    cls: Optional[Callable[..., Any]]  # None: no module (no position signal at that site)
    sites: FrozenSet[str]
    paper: str
    help: str
    options: Tuple[Option, ...] = field(default_factory=tuple)


ENCODINGS: Dict[str, Encoding] = {}
OPTIONS: Dict[str, Option] = {}
MODIFIERS: Dict[str, str] = {}  # dest -> paper, options that act on every encoding (randomized positions)

# the site flags: dest -> (sites it chooses for, default, help head)
SITE_FLAGS = {
    "absolute_positions": ((INPUT,), "sinusoidal", "absolute positions added to the token embeddings"),
    "self_attn_pos": ((ENCODER_SELF, DECODER_SELF), "none", "position encoding of every self-attention"),
    "encoder_self_attn_pos": ((ENCODER_SELF,), None, "position encoding of the encoder's self-attention "
                                                      "(default: --self-attn-pos)"),
    "decoder_self_attn_pos": ((DECODER_SELF,), None, "position encoding of the decoder's causal self-attention "
                                                      "(default: --self-attn-pos)"),
    "cross_attn_pos": ((CROSS,), "none", "position encoding of decoder-to-encoder attention"),
}


def register_position(name: str, *, sites: Iterable[str], paper: str, help: str, options: Iterable[Option] = ()):
    """Class decorator (or, with `cls=None` via `register_position(...)(None)`, an entry that builds nothing)."""
    sites = frozenset(sites)
    unknown = sites - {INPUT, *ATTENTION_SITES}
    if unknown or not sites:
        raise UsageError(f"position encoding {name!r}: unknown sites {sorted(unknown)} (known: {INPUT}, "
                         f"{', '.join(ATTENTION_SITES)})")
    if INPUT in sites and sites & set(ATTENTION_SITES) and name != "none":
        raise UsageError(f"position encoding {name!r} cannot act both on the input and in attention")
    options = tuple(options)

    def wrap(cls):
        if name in ENCODINGS:
            raise UsageError(f"position encoding {name!r} registered twice")
        for o in options:
            if OPTIONS.get(o.dest, o) != o:
                raise UsageError(f"option {o.flag} of {name!r} is declared differently by another encoding")
        for o in options:
            OPTIONS[o.dest] = o
        ENCODINGS[name] = Encoding(name, cls, sites, paper, help, options)
        return cls

    return wrap


def register_option(option: Option, paper: str) -> Option:
    """An option of no single encoding but of how positions are made for all of them (e.g. randomized positions)."""
    if OPTIONS.get(option.dest, option) != option:
        raise UsageError(f"option {option.flag} declared twice, differently")
    OPTIONS[option.dest], MODIFIERS[option.dest] = option, paper
    return option


def names(*sites: str):
    """Encodings that can act at any of `sites`, "none" first."""
    return sorted((n for n, e in ENCODINGS.items() if e.sites & set(sites)), key=lambda n: (n != "none", n))


def _entry(name: str, site: str) -> Encoding:
    if name not in ENCODINGS:
        raise UsageError(f"unknown position encoding {name!r}; choose from {', '.join(names(site))} (one of "
                         f"a plugin: pass its folder with --user-dir, to fairseq-compgen eval and help too)")
    entry = ENCODINGS[name]
    if site not in entry.sites:
        hint = "; choose per side with --encoder-self-attn-pos / --decoder-self-attn-pos" \
            if site in (ENCODER_SELF, DECODER_SELF) and entry.sites & {ENCODER_SELF, DECODER_SELF} else ""
        raise UsageError(f"position encoding {name!r} cannot act in {site} ({', '.join(sorted(entry.sites))} "
                         f"only){hint}")
    return entry


def _options(entry: Encoding, values: Dict[str, Any]) -> Dict[str, Any]:
    """Constructor keywords from `values` keyed by dest or param; missing or None values take the default."""
    out = {}
    for o in entry.options:
        v = values.get(o.dest, values.get(o.param))
        out[o.param] = o.default if v is None else v
    return out


def build_attention_position(name: Optional[str], site: str, *, embed_dim: int, num_heads: int,
                             max_positions: Optional[int] = None, **values) -> Optional[Any]:
    """The module of encoding `name` for attention site `site` (None for "none"). `values`: options by dest or
    param name (e.g. rel_span=4 or span=4); missing ones take their defaults. With `max_positions` (the largest
    position it will see) the module's `check_max_positions` may refuse options that cannot work that far."""
    entry = _entry(name or "none", site)
    if entry.cls is None:
        return None
    module = entry.cls(embed_dim=embed_dim, num_heads=num_heads, causal=site == DECODER_SELF,
                       **_options(entry, values))
    if max_positions is not None and hasattr(module, "check_max_positions"):
        module.check_max_positions(max_positions)
    return module


def build_input_position(name: Optional[str], *, embed_dim: int, padding_idx: int, scaling: Optional[str],
                         **values) -> Optional[Any]:
    """The absolute-position module of encoding `name` (None for "none")."""
    entry = _entry(name or "none", INPUT)
    if entry.cls is None:
        return None
    return entry.cls(embed_dim=embed_dim, padding_idx=padding_idx, scaling=scaling, **_options(entry, values))


def option_values(args) -> Dict[str, Any]:
    """Every registered option's value from a namespace (missing: None, i.e. the default)."""
    return {dest: getattr(args, dest, None) for dest in OPTIONS}


def unused_options(args, chosen: Iterable[str] = (), taken: Iterable[str] = ()) -> list:
    """The options (Option) set to another value than their default that no encoding chosen by the flags (or in
    `chosen`: a tagger's parent head) takes, nor anything in `taken` (dests another module reads): flags that
    would change nothing (`--rope-theta 500` with no rope)."""
    names = {site_name(args, site) for site in (INPUT, *ATTENTION_SITES)} | set(chosen)
    used = {o.dest for n in names if n in ENCODINGS for o in ENCODINGS[n].options} | set(taken) | set(MODIFIERS)
    return [o for o in OPTIONS.values() if o.dest not in used and getattr(args, o.dest, None) not in (None, o.default)]


def site_name(args, site: str) -> str:
    """The encoding chosen for `site` by the flags (per-side self-attention flags win over --self-attn-pos)."""
    if site == INPUT:
        return getattr(args, "absolute_positions", None) or "none"
    if site == CROSS:
        return getattr(args, "cross_attn_pos", None) or "none"
    side = getattr(args, "encoder_self_attn_pos" if site == ENCODER_SELF else "decoder_self_attn_pos", None)
    return side or getattr(args, "self_attn_pos", None) or "none"


def _choice_help(sites) -> str:
    return "; ".join(f"{n} = {ENCODINGS[n].help} ({ENCODINGS[n].paper})" for n in names(*sites))


def add_args(add_argument: Callable[..., Any]) -> None:
    """Add the site flags and every option flag (argparse's `add_argument`)."""
    for dest, (sites, default, head) in SITE_FLAGS.items():
        per_side = dest in ("encoder_self_attn_pos", "decoder_self_attn_pos")  # the choices are told once
        add_argument("--" + dest.replace("_", "-"), choices=names(*sites),
                     help=head if per_side else f"{head}: {_choice_help(sites)}")
    for o in sorted(OPTIONS.values(), key=lambda o: o.dest):
        users = MODIFIERS.get(o.dest) or "for " + ", ".join(n for n, e in ENCODINGS.items() if o in e.options)
        add_argument(o.flag, type=o.type, metavar=o.metavar or o.param.upper(),
                     help=f"{o.help} ({users}; default {o.default})")


def defaults() -> Dict[str, Any]:
    """Defaults of the site flags and of every option, for `base_architecture`."""
    out = {dest: default for dest, (_, default, _) in SITE_FLAGS.items()}
    out.update({o.dest: o.default for o in OPTIONS.values()})
    return out


def describe() -> str:
    """One line per encoding: name, sites, paper (for `fairseq-compgen help`)."""
    rows = [(n, ", ".join(s for s in (INPUT, *ATTENTION_SITES) if s in e.sites), e.paper)
            for n, e in sorted(ENCODINGS.items())]
    w0, w1 = max(len(r[0]) for r in rows), max(len(r[1]) for r in rows)
    lines = [f"  {n:<{w0}}  {s:<{w1}}  {p}" for n, s, p in rows]
    lines += [f"  {OPTIONS[d].flag} {OPTIONS[d].metavar or 'X'}: {OPTIONS[d].help} ({paper})" for d, paper in MODIFIERS.items()]
    return "\n".join(lines)
