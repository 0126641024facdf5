//! Fuzzing: random bytes and mutated captured messages never panic the decoder or the
//! frame reader, and whatever the decoder accepts re-encodes to the very same bytes.
//!
//! The default suite runs 100,000 cases; the long run is ignored by default:
//! `STRATA_BUS_FUZZ_ITERS=5000000 cargo test -p strata-server --release --lib cluster::bus::fuzz_tests -- --ignored`
//! (`STRATA_BUS_FUZZ_SEED` picks the seed; a failure prints the seed and case number).

use super::ext::ext_type;
use super::header::{mflag0, offset, HEADER_LEN};
use super::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn fixtures() -> Vec<Vec<u8>> {
    let dir = super::fixture_tests::dir();
    let mut out: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .expect("fixtures directory")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "bin"))
        .map(|e| std::fs::read(e.path()).expect("fixture"))
        .collect();
    out.sort();
    // Generated messages for what the capture lacks: a module message, extensions of
    // Redis 7.2's types and of an unknown one.
    let mut h = Header::new(NodeName([b'f'; 40]));
    h.mflags[0] = mflag0::EXT_DATA;
    let body = Body::Module(Module {
        module_id: *b"modid\0\0\x01",
        module_type: 7,
        payload: b"payload".to_vec(),
    });
    out.push(encode(&Msg::new(h.clone(), body)));
    let exts = vec![
        PingExt::hostname(b"host.example").unwrap(),
        PingExt::forgotten_node(NodeName([b'1'; 40]), 60),
        PingExt::shard_id(NodeName([b'2'; 40])),
        PingExt {
            ext_type: 4242,
            reserved: 1,
            data: vec![5; 24],
        },
    ];
    out.push(encode(&Msg::new(
        h,
        Body::Pong(Ping {
            gossip: Vec::new(),
            exts,
        }),
    )));
    out
}

/// Checks one input: no panic (the test harness reports one), and an accepted message
/// re-encodes to itself.
fn check(input: &[u8], seed: u64, case: u64) {
    if let Ok(msg) = decode(input) {
        assert_eq!(
            encode(&msg),
            input,
            "seed {seed} case {case}: accepted input re-encodes differently"
        );
        if let Some(p) = msg.ping() {
            for e in &p.exts {
                let _ = e.view();
            }
        }
    }
}

/// Big-endian fields worth aiming at: header counts and lengths, and the first words of
/// the body (gossip, extension headers, PUBLISH and MODULE lengths).
const FIELDS: [(usize, usize); 8] = [
    (offset::TOTLEN, 4),
    (offset::TYPE, 2),
    (offset::COUNT, 2),
    (offset::EXTENSIONS, 2),
    (offset::MFLAGS, 1),
    (HEADER_LEN, 4),
    (HEADER_LEN + 4, 4),
    (HEADER_LEN + 8, 4),
];

fn mutate(rng: &mut StdRng, base: &[u8]) -> Vec<u8> {
    let mut m = base.to_vec();
    for _ in 0..rng.gen_range(1..4) {
        match rng.gen_range(0..7) {
            0 if !m.is_empty() => {
                let i = rng.gen_range(0..m.len());
                m[i] ^= 1 << rng.gen_range(0..8);
            }
            1 if !m.is_empty() => {
                let i = rng.gen_range(0..m.len());
                m[i] = rng.gen();
            }
            2 => {
                let (at, size) = FIELDS[rng.gen_range(0..FIELDS.len())];
                let v: u32 = match rng.gen_range(0..4) {
                    0 => rng.gen(),
                    1 => rng.gen_range(0..16),
                    2 => (m.len() as u32)
                        .wrapping_add(rng.gen_range(0..16))
                        .wrapping_sub(8),
                    _ => u32::MAX - rng.gen_range(0..3000),
                };
                let bytes = v.to_be_bytes();
                if at + size <= m.len() {
                    m[at..at + size].copy_from_slice(&bytes[4 - size..]);
                }
            }
            3 => m.truncate(rng.gen_range(0..=m.len())),
            4 => {
                let n = rng.gen_range(1..64);
                let at = rng.gen_range(0..=m.len());
                let extra: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
                m.splice(at..at, extra);
            }
            5 => {
                // An extension header in the tail, and the flag and count to match.
                if m.len() >= HEADER_LEN + 8 {
                    let at = HEADER_LEN + rng.gen_range(0..=(m.len() - HEADER_LEN - 8) / 8) * 8;
                    let len: u32 = [0, 8, 16, 24, rng.gen()][rng.gen_range(0..5)];
                    m[at..at + 4].copy_from_slice(&len.to_be_bytes());
                    let ty = [
                        ext_type::HOSTNAME,
                        ext_type::FORGOTTEN_NODE,
                        ext_type::SHARD_ID,
                        rng.gen(),
                    ];
                    m[at + 4..at + 6].copy_from_slice(&ty[rng.gen_range(0..4)].to_be_bytes());
                    m[offset::MFLAGS] |= mflag0::EXT_DATA;
                    m[offset::EXTENSIONS + 1] = rng.gen_range(0..4);
                }
            }
            _ => {
                // Keep totlen honest so the deeper checks run.
                if m.len() >= 8 {
                    let l = (m.len() as u32).to_be_bytes();
                    m[4..8].copy_from_slice(&l);
                }
            }
        }
    }
    m
}

fn random_input(rng: &mut StdRng) -> Vec<u8> {
    let len = if rng.gen_bool(0.5) {
        rng.gen_range(0..64)
    } else {
        rng.gen_range(HEADER_LEN - 8..HEADER_LEN + 600)
    };
    let mut m: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
    if m.len() >= 16 && rng.gen_bool(0.8) {
        m[..4].copy_from_slice(b"RCmb");
        let len = (m.len() as u32).to_be_bytes();
        m[4..8].copy_from_slice(&len);
        m[8..10].copy_from_slice(&1u16.to_be_bytes());
        m[12..14].copy_from_slice(&rng.gen_range(0u16..12).to_be_bytes());
        if m.len() > offset::EXTENSIONS + 2 {
            m[offset::COUNT..offset::COUNT + 2]
                .copy_from_slice(&rng.gen_range(0u16..4).to_be_bytes());
            m[offset::EXTENSIONS..offset::EXTENSIONS + 2]
                .copy_from_slice(&rng.gen_range(0u16..3).to_be_bytes());
        }
    }
    m
}

fn run(seed: u64, iters: u64) {
    let bases = fixtures();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut accepted = 0u64;
    for case in 0..iters {
        let input = if case % 4 == 0 {
            random_input(&mut rng)
        } else {
            let base = rng.gen_range(0..bases.len());
            mutate(&mut rng, &bases[base])
        };
        check(&input, seed, case);
        accepted += decode(&input).is_ok() as u64;
        if case % 64 == 0 {
            // The frame reader, fed the same bytes in random pieces.
            let mut r = FrameReader::new(rng.gen_range(HEADER_LEN as u32..1 << 20));
            for chunk in input.chunks(rng.gen_range(1..3000)) {
                r.feed(chunk);
                while let Ok(Some(f)) = r.next_frame() {
                    check(&f, seed, case);
                }
            }
        }
    }
    // The mutations keep a share of the inputs valid: the re-encode check is exercised.
    assert!(
        accepted > iters / 50,
        "only {accepted} of {iters} inputs decoded"
    );
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn fuzz_decode_never_panics_and_accepted_reencodes() {
    run(env_u64("STRATA_BUS_FUZZ_SEED", 0x05ee_db05), 100_000);
}

#[test]
#[ignore = "long fuzz run; see the module doc for the command"]
fn fuzz_decode_long() {
    let seed = env_u64("STRATA_BUS_FUZZ_SEED", std::process::id().into());
    eprintln!("bus fuzz seed {seed}");
    run(seed, env_u64("STRATA_BUS_FUZZ_ITERS", 5_000_000));
}
