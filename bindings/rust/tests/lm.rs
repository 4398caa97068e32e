// The LM runtime through the Rust binding: tiny GPT-2's logits against transformers' float32
// forward as tests/fixtures/lm/forward_reference.py recorded it (reference.json's token ids,
// tiny_gpt2.full.npy's [16, 261] logits).
use std::path::{Path, PathBuf};

use stk::{Lm, LmWeights, SeqParams, Sequence, Status, POLICY_TOVA, POLICY_WINDOW};

fn root() -> PathBuf {
    match std::env::var_os("STK_SOURCE_ROOT") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
    }
}

/// reference.json's token_ids of `name` (the file is json.dump(indent=1, sort_keys=True)).
fn token_ids(name: &str) -> Vec<i32> {
    let text = std::fs::read_to_string(root().join("tests/fixtures/lm/reference.json")).unwrap();
    let at = text.find(&format!("\"{name}\": {{")).expect("model in reference.json");
    let rest = &text[at..];
    let open = rest.find("\"token_ids\": [").unwrap() + "\"token_ids\": [".len();
    let close = open + rest[open..].find(']').unwrap();
    rest[open..close].split(',').map(|s| s.trim().parse().unwrap()).collect()
}

/// A little-endian f32 C-order .npy: (shape, values).
fn npy(path: &Path) -> (Vec<usize>, Vec<f32>) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..6], b"\x93NUMPY");
    let (hlen, start) = if b[6] == 1 { (u16::from_le_bytes([b[8], b[9]]) as usize, 10) } else { (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12) };
    let header = std::str::from_utf8(&b[start..start + hlen]).unwrap();
    assert!(header.contains("'descr': '<f4'") && header.contains("'fortran_order': False"), "{header}");
    let s = &header[header.find("'shape': (").unwrap() + 10..];
    let shape: Vec<usize> = s[..s.find(')').unwrap()].split(',').filter(|x| !x.trim().is_empty()).map(|x| x.trim().parse().unwrap()).collect();
    let data: Vec<f32> = b[start + hlen..].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    assert_eq!(data.len(), shape.iter().product::<usize>());
    (shape, data)
}

fn argmax(row: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    best
}

#[test]
fn tiny_gpt2_logits_match_transformers() {
    let lm = Lm::open(root().join("bindings/testdata/tiny-gpt2"), LmWeights::F32).unwrap();
    let info = lm.info().unwrap();
    assert_eq!((info.vocab_size, info.model_type.as_str()), (261, "gpt2"));
    let toks = token_ids("tiny_gpt2");
    let (shape, want) = npy(&root().join("tests/fixtures/lm/tiny_gpt2.full.npy"));
    assert_eq!(shape, vec![toks.len(), 261]);
    let v = info.vocab_size as usize;
    // The whole context in the window: the exact model; the prompt at once (GEMM) and token by token.
    for max_batch in [64u32, 1] {
        let mut seq = Sequence::open(&lm, &SeqParams { sinks: 0, window: toks.len() as u32, threads: 2, max_batch, policy: POLICY_WINDOW, recent: 0 }).unwrap();
        let got = seq.feed_all(&toks).unwrap();
        let mut worst = 0f32;
        for t in 0..toks.len() {
            let (g, w) = (&got[t * v..(t + 1) * v], &want[t * v..(t + 1) * v]);
            assert_eq!(argmax(g), argmax(w), "top-1 at position {t} (batch {max_batch})");
            for (a, b) in g.iter().zip(w) {
                worst = worst.max((a - b).abs());
            }
        }
        assert!(worst <= 1e-4, "max |delta logit| {worst}");
        let (last, pos) = seq.logits().unwrap();
        assert_eq!(pos, toks.len() as u64);
        assert_eq!(last, &got[(toks.len() - 1) * v..]);
        seq.reset().unwrap();
        assert_eq!(seq.logits().unwrap().1, 0);
        seq.feed(&toks[..1]).unwrap();
        assert_eq!(argmax(seq.logits().unwrap().0), argmax(&want[..v]));
    }
}

#[test]
fn lm_refusals_carry_their_status() {
    let lm = Lm::open(root().join("bindings/testdata/tiny-gpt2"), LmWeights::F32).unwrap();
    let e = Sequence::open(&lm, &SeqParams { sinks: 0, window: 0, threads: 1, max_batch: 1, policy: POLICY_WINDOW, recent: 0 }).err().unwrap();
    assert_eq!(e.status(), Status::InvalidArgument);
    let mut seq = Sequence::open(&lm, &SeqParams { sinks: 1, window: 4, threads: 1, max_batch: 4, policy: POLICY_WINDOW, recent: 0 }).unwrap();
    let e = seq.feed(&[261]).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(e.message().contains("vocabulary"), "{}", e.message());
    let e = Lm::open(root().join("no-such-model-dir"), LmWeights::F32).err().unwrap();
    assert_ne!(e.status(), Status::Ok);
}

#[test]
fn lm_policy_keeps_sinks_and_newest() {
    let lm = Lm::open(root().join("bindings/testdata/tiny-gpt2"), LmWeights::F32).unwrap();
    for policy in [POLICY_WINDOW, POLICY_TOVA] {
        let mut seq = Sequence::open(&lm, &SeqParams { sinks: 1, window: 4, threads: 1, max_batch: 4, policy, recent: 0 }).unwrap();
        seq.feed(&[5, 17, 3, 99, 42, 7, 8, 150, 2, 60]).unwrap();
        let kept = seq.kept(0, 0).unwrap();
        assert_eq!(kept.len(), 5, "policy {policy}: {kept:?}");
        assert_eq!(kept[0], 0);
        assert_eq!(kept[4], 9);
        if policy == POLICY_WINDOW {
            assert_eq!(kept, vec![0, 6, 7, 8, 9]);
        }
    }
}
