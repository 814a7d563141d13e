"""--encoder-bos (modules/encoder_bos.py): the encoder reads [BOS, source, EOS], Csordás et al.'s encoder input."""
import pytest
import torch

from fairseq_compgen.modules.encoder_bos import prepend_bos
from model_helpers import build

PAD, BOS, EOS = 1, 0, 2


def slow_prepend(rows, left: bool, width: int):
    """The expected batch, row by row: BOS + tokens + EOS, padded on the given side to `width`."""
    out = []
    for r in rows:
        seq = [BOS, *r, EOS]
        fill = [PAD] * (width - len(seq))
        out.append(fill + seq if left else seq + fill)
    return torch.tensor(out)


def batch(rows, left: bool):
    width = max(len(r) for r in rows) + 1
    return torch.tensor([([PAD] * (width - len(r) - 1) if left else []) + [*r, EOS] +
                         ([] if left else [PAD] * (width - len(r) - 1)) for r in rows])


@pytest.mark.parametrize("left", [True, False], ids=["left-padded", "right-padded"])
def test_bos_goes_right_before_each_sentence(left):
    rows = [[5, 6, 7], [8], [9, 10, 11, 12], [5, 5]]
    got = prepend_bos(batch(rows, left), BOS, PAD)
    assert torch.equal(got, slow_prepend(rows, left, max(map(len, rows)) + 2))
    unpadded = prepend_bos(batch([[5, 6]], left), BOS, PAD)  # one sentence: nothing padded, BOS first
    assert unpadded.tolist() == [[BOS, 5, 6, EOS]]


def test_encoder_reads_bos_and_a_sentence_encodes_alike_however_padded():
    torch.manual_seed(0)
    with_bos = build("rel_uni_transformer", encoder_bos=True).eval()
    rows = [[5, 6, 7, 8], [9, 10]]
    with torch.no_grad():
        alone = with_bos.encoder(batch([rows[1]], True), None)["encoder_out"][0][0]  # [len + 2, C]
        for left in (True, False):
            out = with_bos.encoder(batch(rows, left), None)
            x, mask = out["encoder_out"][0][1], out["encoder_padding_mask"][0][1]
            assert out["src_tokens"][0].size(1) == 6 and int((~mask).sum()) == 4  # BOS, 9, 10, EOS
            assert torch.allclose(x[~mask], alone, atol=1e-5)  # relative positions: padding changes nothing
    # the BOS changes the encoding (it is read), and its embedding row learns
    without = build("rel_uni_transformer").eval()
    without.load_state_dict(with_bos.state_dict())
    with torch.no_grad():
        plain = without.encoder(batch([rows[1]], True), None)["encoder_out"][0][0]
    assert plain.size(0) == 3 and not torch.allclose(plain, alone[1:], atol=1e-3)
    with_bos.train()
    src = batch(rows, True)
    prev = torch.tensor([[EOS, 4, 5], [EOS, 6, 4]])
    with_bos(src, None, prev)[0].sum().backward()
    assert with_bos.encoder.embed.embed.weight.grad[BOS].abs().sum() > 0


def test_step_by_step_decoding_equals_full_forward_with_encoder_bos():
    torch.manual_seed(0)
    model = build("rel_uni_transformer_scan", encoder_bos=True).eval()
    src = batch([[5, 6, 7], [8]], True)
    prev = torch.tensor([[EOS, 4, 5, 6], [EOS, 6, 4, 4]])
    with torch.no_grad():
        full = model(src, None, prev)[0]
        enc, state = model.encoder(src, None), {}
        steps = [model.decoder(prev[:, : t + 1], enc, incremental_state=state)[0] for t in range(prev.size(1))]
    assert (torch.cat(steps, 1) - full).abs().max() < 1e-4


def test_the_longest_source_accepted_leaves_room_for_the_bos():
    assert build("rel_uni_transformer", encoder_bos=True, max_source_positions=20).encoder.max_positions() == 19
    assert build("rel_uni_transformer", max_source_positions=20).encoder.max_positions() == 20


@pytest.mark.parametrize("left", [True, False], ids=["left-padded", "right-padded"])
def test_the_copy_decoder_never_copies_the_inserted_bos(left):
    """Ontañón et al.'s copy decoder with --encoder-bos: <s> is no source word, so it gets no copy mass; p(<s>) is
    the vocabulary distribution's share alone, (1 - w) p1(<s>), and the source words share all of the copy mass."""
    torch.manual_seed(0)
    model = build("ontanon_rel2_eb_c", encoder_bos=True).eval()
    dec = model.decoder
    with torch.no_grad():
        dec.copy.gate.bias.fill_(2.0)  # mostly copying: w near 0.9
    rows = [[5, 6, 7], [8]]
    src, prev = batch(rows, left), torch.tensor([[EOS, 4, 5], [EOS, 6, 4]])
    with torch.no_grad():
        p = model.get_normalized_probs(model(src, None, prev), log_probs=False)  # [B, T, V]
        enc = model.encoder(src, None)
        y, _ = dec.extract_features(prev, enc)
        p1 = torch.softmax(dec.output_layer(y), -1)
        w = torch.sigmoid(dec.copy.gate(y))  # [B, T, 1]
    assert torch.allclose(p[..., BOS], (1 - w[..., 0]) * p1[..., BOS], atol=1e-6)
    for b, r in enumerate(rows):
        words = sorted(set(r)) + [EOS]  # the source's tokens as the binarized data has them
        copied = p[b][:, words] - (1 - w[b]) * p1[b][:, words]  # [T, words]: the copy's share
        assert torch.allclose(copied.sum(-1), w[b, :, 0], atol=1e-5)


def test_the_tagger_refuses_encoder_bos():
    """compgen_tagger accepted --encoder-bos and failed in the loss (batch 56 against 48 tags: helper audit,
    2026-11-28): it reads one tag per source position, so a refusal before anything is built."""
    import argparse

    from fairseq_compgen.errors import UsageError
    from fairseq_compgen.models.tagger import CompgenTaggerModel

    with pytest.raises(UsageError, match="--encoder-bos does not apply to compgen_tagger"):
        CompgenTaggerModel.build_model(argparse.Namespace(encoder_bos="True"), task=None)
