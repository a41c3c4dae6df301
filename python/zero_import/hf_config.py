"""The config.json of a Hugging Face directory (hf.py): read by
transformers' config class for its model_type, its sizes checked before
anything is built, and the causal language model class it names; the
directory's file names, and the failure every part of hf.py raises."""

import json
import os
import re

from .errors import ImportFailure, source_of

# transformers is imported in the functions that use it: importing a
# FILE.py:FUNCTION model loads this module without it.

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"


def fail(message, path=None, source=None):
    raise ImportFailure(message, path=path, source=source)


def read_config(directory):
    """transformers' config of the model in `directory`."""
    if not os.path.isdir(directory):
        fail("%s: no such directory" % directory)
    path = os.path.join(directory, CONFIG)
    if not os.path.isfile(path):
        fail("%s: no %s (a Hugging Face model directory has one)" % (
            directory, CONFIG))
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        fail("%s: not UTF-8 text (byte 0x%02x at offset %d)" % (
            path, data[e.start], e.start))
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        fail("%s:%d:%d: is not valid JSON: %s" % (path, e.lineno, e.colno,
                                                   e.msg))
    except RecursionError:
        fail("%s: is nested too deeply to read" % path)
    if not isinstance(raw, dict):
        fail("%s: the top level must be a JSON object" % path)
    from transformers.models.auto.configuration_auto import \
        CONFIG_MAPPING_NAMES
    model_type = raw.get("model_type")
    if model_type is None:
        fail("%s: no model_type" % path)
    if not isinstance(model_type, str):
        fail("%s: \"model_type\": %s: expected a string" % (
            path, json.dumps(model_type)))
    if model_type not in CONFIG_MAPPING_NAMES:
        fail("%s: model_type '%s' is not a model this transformers (%s) "
             "knows" % (path, model_type, _transformers_version()))
    check_sizes(raw, CONFIG_MAPPING_NAMES[model_type], path)
    from transformers import AutoConfig
    try:
        from huggingface_hub.errors import StrictDataclassError
    except ImportError:  # a huggingface_hub without typed configs
        StrictDataclassError = ()
    try:
        config = AutoConfig.from_pretrained(directory)
    except StrictDataclassError as e:
        # transformers' typed configs: "Validation error for field 'K':
        # TypeError: Field 'K' expected int, got str (value: '2')".
        m = re.match(r"Validation error for field '([^']+)':\s*\w+: "
                     r"(?:Field '[^']+' )?(.*?)(?: \(value: .*\))?$",
                     str(e).strip(), re.S)
        if m and m.group(1) in raw:
            fail("%s: \"%s\": %s: %s" % (path, m.group(1), json.dumps(
                raw[m.group(1)]), m.group(2)))
        fail("%s: transformers refuses it: %s" % (path, " ".join(
            str(e).split())))
    except (ValueError, TypeError, KeyError, AttributeError, IndexError,
            OverflowError, RecursionError) as e:
        # transformers' own code on a value of another type.
        fail("%s: transformers cannot read it: %s: %s" % (
            path, type(e).__name__, e))
    check_relations(config, path)
    return config


# The config.json keys that size a model (by transformers' common names; a
# family's own name for one, such as GPT-2's n_embd, through its config
# class's attribute_map): each, where config.json sets it, a positive
# integer (or a list of them, per layer). A zero or negative size would
# build a model with empty or impossible tensors.
_SIZES = ("vocab_size", "hidden_size", "intermediate_size",
          "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
          "head_dim", "max_position_embeddings", "moe_intermediate_size",
          "num_local_experts", "num_experts", "n_routed_experts",
          "num_experts_per_tok")

# The names of the number of routed experts, in the order looked up.
_EXPERT_COUNTS = ("num_local_experts", "num_experts", "n_routed_experts")


def _json_key(config_class, name):
    """config.json's key of transformers' common attribute `name`."""
    return getattr(config_class, "attribute_map", {}).get(name, name)


# Counts the importer builds and traces one module at a time, so that its
# time grows with them: a bound far past every published decoder (under 200
# layers, under 400 routed experts) keeps a typo or a hostile 2^64 from
# running until killed.
_COUNT_LIMITS = {"num_hidden_layers": 4096, "num_local_experts": 65536,
                 "num_experts": 65536, "n_routed_experts": 65536}


def check_sizes(raw, class_name, path):
    """Each size config.json sets (_SIZES) is a positive integer, or null
    where transformers derives it; the counts of _COUNT_LIMITS are at most
    their bound."""
    import transformers
    cls = getattr(transformers, class_name, None)
    for name in _SIZES:
        key = _json_key(cls, name)
        if key not in raw or raw[key] is None:
            continue
        value = raw[key]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                   for v in (value if isinstance(value, list) else [value])):
            fail("%s: \"%s\": %s: expected a positive integer" % (
                path, key, json.dumps(value)))
        limit = _COUNT_LIMITS.get(name)
        if limit and not isinstance(value, list) and value > limit:
            fail("%s: \"%s\": %d: expected at most %d (zero-import builds "
                 "and traces each one)" % (path, key, value, limit))


def check_relations(config, path):
    """The sizes that bound one another: a token's top-k experts among the
    routed experts, query heads in whole groups per key/value head."""
    def get(name):
        try:
            value = getattr(config, name, None)
        except Exception:  # a per-layer attribute read as one value
            return None
        return value if isinstance(value, int) and \
            not isinstance(value, bool) else None

    def key(name):
        return _json_key(type(config), name)

    top_k = get("num_experts_per_tok")
    experts = next(((n, get(n)) for n in _EXPERT_COUNTS if get(n)),
                   (None, None))
    if top_k and experts[1] and top_k > experts[1]:
        fail("%s: \"%s\": %d: expected at most \"%s\" (%d): a token is "
             "routed to its top %d among the experts" % (
                 path, key("num_experts_per_tok"), top_k, key(experts[0]),
                 experts[1], top_k))
    heads, kv = get("num_attention_heads"), get("num_key_value_heads")
    if heads and kv and heads % kv:
        fail("%s: \"%s\": %d: expected a divisor of \"%s\" (%d): each "
             "key/value head serves a whole group of query heads" % (
                 path, key("num_key_value_heads"), kv,
                 key("num_attention_heads"), heads))


def _transformers_version():
    import transformers
    return transformers.__version__


def model_class(config, directory):
    """transformers' causal-LM class for `config`; an encoder-decoder or a
    model without one is refused."""
    import transformers
    from transformers.models.auto.modeling_auto import \
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    archs = getattr(config, "architectures", None) or []
    if not isinstance(archs, list) or not all(isinstance(a, str)
                                              for a in archs):
        fail("%s: \"architectures\": %s: expected a list of class names" %
             (os.path.join(directory, CONFIG), json.dumps(archs)))
    arch = archs[0] if archs else None
    cls = getattr(transformers, arch, None) if arch else None
    path = os.path.join(directory, CONFIG)
    if getattr(config, "is_encoder_decoder", False):
        fail("the encoder-decoder structure of %s (%s) is not supported: "
             "zero-import takes decoder-only causal language models" % (
                 arch or config.model_type, path), path="",
             source=source_of(cls) if cls else None)
    name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.model_type)
    if arch is not None and arch != name:
        fail("%s: architectures names %s, which is not %s's causal "
             "language model (%s); zero-import takes causal language "
             "models" % (path, arch, config.model_type, name or "none"),
             path="", source=source_of(cls) if cls else None)
    if name is None:
        fail("%s: model_type '%s' has no causal language model in "
             "transformers" % (path, config.model_type))
    return getattr(transformers, name)
