"""campaign/search_errors.py: search errors (the model prefers the reference to what was decoded) and model errors,
with sequence log-probabilities checked against step-by-step decoding."""
import gzip
import json
import importlib.util
from pathlib import Path

import pytest
import torch

from fairseq_compgen.errors import UsageError
from model_helpers import build

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("search_errors", REPO / "campaign" / "search_errors.py")
search_errors = importlib.util.module_from_spec(spec)
spec.loader.exec_module(search_errors)


def _slow_log_prob(model, src_dict, tgt_dict, source, output):
    """log p(output + EOS | source) one token at a time through the decoder's incremental state (the direct
    definition: a sum of each next token's log-probability given the tokens before it)."""
    src = src_dict.encode_line(" ".join(source), add_if_not_exist=False, append_eos=True).long()[None]  # [1, S]
    target = tgt_dict.encode_line(" ".join(output), add_if_not_exist=False, append_eos=True).long().tolist()
    enc = model.encoder(src, src_lengths=torch.tensor([src.size(1)]))
    state, prev, total = {}, [tgt_dict.eos()], 0.0
    with torch.no_grad():
        for token in target:
            out = model.decoder(torch.tensor([prev]), encoder_out=enc, incremental_state=state)
            lprobs = model.get_normalized_probs((out[0][:, -1:], out[1]), log_probs=True)[0, -1]
            total += float(lprobs[token])
            prev.append(token)
    return total


@pytest.mark.parametrize("arch", ["rel_uni_transformer_scan", "linear_l2_uni_transformer_scan", "syntactic_attention_scan"])
def test_sequence_log_probs_equal_step_by_step_decoding(arch):
    torch.manual_seed(0)
    model = build(arch, src_words=6, tgt_words=4, encoder_embed_dim=16, decoder_embed_dim=16,
                  encoder_ffn_embed_dim=32, decoder_ffn_embed_dim=32).eval()
    src_dict, tgt_dict = model.encoder.dictionary, model.decoder.dictionary
    g = torch.Generator().manual_seed(1)
    pairs = [([f"w{int(i)}" for i in torch.randint(0, 6, (int(n),), generator=g)],
              [f"w{int(i)}" for i in torch.randint(0, 4, (int(m),), generator=g)])
             for n, m in torch.randint(1, 7, (9, 2), generator=g)]  # sources and outputs of 1-6 tokens
    fast = search_errors.sequence_log_probs(model, src_dict, tgt_dict, pairs, batch_size=4)  # batches of mixed lengths
    slow = [_slow_log_prob(model, src_dict, tgt_dict, s, y) for s, y in pairs]
    assert fast == pytest.approx(slow, abs=1e-4)


def test_an_example_is_a_search_error_exactly_when_the_model_prefers_its_reference(tmp_path):
    torch.manual_seed(0)
    model = build("compgen_transformer_scan", src_words=6, tgt_words=4, encoder_embed_dim=16, decoder_embed_dim=16,
                  encoder_ffn_embed_dim=32, decoder_ffn_embed_dim=32).eval()
    src_dict, tgt_dict = model.encoder.dictionary, model.decoder.dictionary
    # outputs of 1-2 words ranked by the model's own probability for each source (the slow definition): a wrong
    # output the model ranks below its reference is a search error, one it ranks above is a model error
    candidates = [[f"w{a}"] for a in range(4)] + [[f"w{a}", f"w{b}"] for a in range(4) for b in range(4)]
    designed = []  # (source, hypothesis, reference, is a search error)
    for source in (["w0", "w1"], ["w3"], ["w4", "w5", "w0"]):
        ranked = sorted(candidates, key=lambda y: _slow_log_prob(model, src_dict, tgt_dict, source, y))
        worst, best = ranked[0], ranked[-1]
        designed += [(source, worst, best, True), (source, best, worst, False)]
    designed[-1] = (designed[-1][0], designed[-1][2], designed[-1][2], None)  # right: not counted at all
    lines = []
    for i, (s, h, r, _) in enumerate(designed):
        lines += [f"S-{i}\t{' '.join(s)}\n", f"T-{i}\t{' '.join(r)}\n", f"H-{i}\t-0.5\t{' '.join(h)}\n"]
    outputs = tmp_path / "gen.outputs.gz"
    outputs.write_bytes(gzip.compress("".join(lines).encode()))
    n, wrong = search_errors.wrong_examples(str(outputs))
    assert n == 6 and [w[0] for w in wrong] == [0, 1, 2, 3, 4]  # example 5 is right
    counts = search_errors.classify(model, src_dict, tgt_dict, wrong, batch_size=2)
    assert (counts["wrong"], counts["search_errors"], counts["model_errors"]) == (5, 3, 2)
    expected = {}
    for s, h, r, search in designed[:5]:
        c = expected.setdefault(str(len(r)), {"wrong": 0, "search_errors": 0})
        c["wrong"] += 1
        c["search_errors"] += search
    assert counts["per_length"] == {k: expected[k] for k in sorted(expected, key=int)}
    outputs.write_bytes(gzip.compress("".join(lines[1:]).encode()))  # example 0's source line missing
    with pytest.raises(UsageError, match="no source line for 1 of 6 examples"):
        search_errors.wrong_examples(str(outputs))


def test_outputs_of_another_vocabulary_and_a_batch_size_below_one_are_refused():
    torch.manual_seed(0)
    model = build("compgen_transformer_scan", src_words=6, tgt_words=4, encoder_embed_dim=16, decoder_embed_dim=16,
                  encoder_ffn_embed_dim=32, decoder_ffn_embed_dim=32).eval()
    src_dict, tgt_dict = model.encoder.dictionary, model.decoder.dictionary
    search_errors.check_words(src_dict, tgt_dict, [(0, ["w5"], ["<unk>"], ["w3"])], "gen.outputs.gz")  # <unk>: a word
    for wrong, line in (([(7, ["w9"], ["w1"], ["w2"])], "S-7"), ([(3, ["w1"], ["w1", "jump"], ["w2"])], "H-3"),
                        ([(2, ["w1"], ["w1"], ["w5"])], "T-2")):  # w5 is a source word only
        with pytest.raises(UsageError, match=f"gen.outputs.gz: line {line} has '.*', a word the checkpoint's"):
            search_errors.check_words(src_dict, tgt_dict, wrong, "gen.outputs.gz")
    for size in (0, -1):
        with pytest.raises(UsageError, match=f"--batch-size {size}: expected a positive number"):
            search_errors.sequence_log_probs(model, src_dict, tgt_dict, [(["w1"], ["w2"])], batch_size=size)
        with pytest.raises(UsageError, match=f"--batch-size {size}"):  # before anything is read
            search_errors.main(["missing.pt", "missing_data", "missing.outputs.gz", "--batch-size", str(size)])


def test_outputs_decoded_to_the_references_length_limits_are_refused(tmp_path):
    """An output cut at its batch's longest reference ends in a forced EOS that counts against it, so such outputs
    (eval's greedy exact-match decoding, and every eval before 2026-11-29) cannot be classified."""
    outputs = tmp_path / "gen.outputs.gz"
    outputs.write_bytes(gzip.compress(b"S-0\tw1\nT-0\tw2\nH-0\t-0.5\tw3\n"))
    record = tmp_path / "gen.json"
    for limit, when in ((None, r" \(as every evaluation before 2026-11-29 did\)"),
                        ({"from_references": True, "max_len_b": 49}, "")):
        record.write_text(json.dumps({"n": 1} if limit is None else {"n": 1, "max_len": limit}))
        with pytest.raises(UsageError, match=f"gen.json: these outputs were decoded with each batch stopped at its "
                                             f"longest reference{when}; .*--max-len-b 200"):
            search_errors.check_length_limit(str(outputs))
    record.write_text(json.dumps({"n": 1, "max_len": {"from_references": False, "max_len_a": 0.0, "max_len_b": 200}}))
    search_errors.check_length_limit(str(outputs))
    record.unlink()
    search_errors.check_length_limit(str(outputs))  # no record beside it: nothing says how it was decoded
    generated = tmp_path / "gen.generate.txt"
    for flag, refused in (("True", True), ("False", False)):
        generated.write_text(f"{{'max_len_from_target': {flag}}}\nS-0\tw1\n")
        if refused:
            with pytest.raises(UsageError, match="gen.generate.txt: decoded with --max-len-from-target"):
                search_errors.check_length_limit(str(generated))
        else:
            search_errors.check_length_limit(str(generated))
