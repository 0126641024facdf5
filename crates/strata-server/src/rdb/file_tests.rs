//! The file reader against files written by redis-server 7.0.15 (`file_fixtures.rs`),
//! files built here for the opcodes Redis 7.0 does not write, and truncated, bit-flipped
//! and hostile files.

use super::file::{opcode, FileError, FileReader, Item};
use super::fixtures::{b, hex};
use super::*;
use std::collections::BTreeMap;

/// Every item of `data`, or the first error.
fn items(data: &[u8]) -> Result<Vec<Item>, FileError> {
    let mut r = FileReader::open(data)?;
    let mut out = Vec::new();
    while let Some(i) = r.next_item()? {
        out.push(i);
    }
    Ok(out)
}

fn sorted(mut v: Value) -> Value {
    match &mut v {
        Value::Set(s) => s.sort(),
        Value::Hash(h) => h.sort(),
        Value::ZSet(z) => z.sort_by(|a, b| a.0.cmp(&b.0)),
        _ => {}
    }
    v
}

/// The keys of `data` by (db, key): value (collections sorted) and expiry.
fn keys(data: &[u8]) -> BTreeMap<(u64, Vec<u8>), (Value, Option<u64>)> {
    items(data)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .filter_map(|i| match i {
            Item::Key(e) => Some(((e.db, e.key), (sorted(e.value), e.expire_ms))),
            _ => None,
        })
        .collect()
}

#[test]
fn every_type_from_redis() {
    let data = hex(file_fixtures::EVERY_TYPE);
    let all = items(&data).unwrap();
    assert!(all.contains(&Item::Aux(b("redis-ver"), b("7.0.15"))));
    assert!(all.contains(&Item::SelectDb(5)));
    let lib = "#!lua name=mylib\nredis.register_function('echo1', function(keys, args) \
               return args[1] end)";
    assert!(all.contains(&Item::Function(b(lib))));
    let k = keys(&data);
    let get = |db: u64, key: &str| {
        k.get(&(db, b(key)))
            .unwrap_or_else(|| panic!("{key} missing"))
            .clone()
    };
    let s = |v: &str| (Value::String(b(v)), None);
    assert_eq!(get(0, "str"), s("bar"));
    assert_eq!(get(0, "int8"), s("100"));
    assert_eq!(get(0, "int16"), s("-1000"));
    assert_eq!(get(0, "int32"), s("1000000"));
    assert_eq!(get(0, "int64"), s("1234567890123"));
    assert_eq!(
        get(0, "lzf"),
        (Value::String(b("abcdefghij").repeat(10)), None)
    );
    assert_eq!(
        get(0, "expiring"),
        (Value::String(b("soon")), Some(4_102_444_800_000))
    );
    let strs = |v: &[&str]| v.iter().map(|s| b(s)).collect::<Vec<_>>();
    assert_eq!(
        get(0, "list1").0,
        Value::List(strs(&["a", "b", "1", "-2", "300", "70000", "5000000000"]))
    );
    let ten: Vec<Vec<u8>> = (0..10).map(|i| format!("e{i}").into_bytes()).collect();
    assert_eq!(get(0, "list3").0, Value::List(ten));
    assert_eq!(get(0, "intset").0, Value::Set(strs(&["-5", "1", "2", "3"])));
    assert_eq!(
        get(0, "setbig").0,
        Value::Set(strs(&["1", "2", "3", "4", "5", "6"]))
    );
    assert_eq!(
        get(0, "setstr").0,
        Value::Set(strs(&["7", "apple", "banana"]))
    );
    let four = [("a", 1.0), ("b", 2.5), ("c", -3.0), ("d", f64::INFINITY)];
    let zs = |v: &[(&str, f64)]| Value::ZSet(v.iter().map(|(m, s)| (b(m), *s)).collect());
    assert_eq!(get(0, "zsmall").0, zs(&four));
    let mut six = four.to_vec();
    six.extend([("e", f64::NEG_INFINITY), ("f", 0.1)]);
    assert_eq!(get(0, "zbig").0, zs(&six));
    let hs = |v: &[(&str, &[u8])]| Value::Hash(v.iter().map(|(f, x)| (b(f), x.to_vec())).collect());
    assert_eq!(
        get(0, "hsmall").0,
        hs(&[("f1", b"v1"), ("f2", b"22"), ("n", b"5000000000")])
    );
    let long = b("y").repeat(40);
    assert_eq!(
        get(0, "hbig").0,
        hs(&[
            ("a", b"1"),
            ("b", b"2"),
            ("c", b"3"),
            ("d", b"4"),
            ("long", &long)
        ])
    );
    let Value::String(hll) = get(0, "hll").0 else {
        panic!("HLL is a string")
    };
    assert!(hll.starts_with(b"HYLL"));
    assert_eq!(get(5, "other"), s("in db 5"));
    assert_eq!(k.len(), 18, "{:?}", k.keys().collect::<Vec<_>>());
}

#[test]
fn lfu_lru_empty_and_unchecked_files() {
    let entry = |h: &str| {
        items(&hex(h))
            .unwrap()
            .into_iter()
            .find_map(|i| match i {
                Item::Key(e) => Some(e),
                _ => None,
            })
            .expect("one key")
    };
    let lfu = entry(file_fixtures::LFU);
    assert_eq!((lfu.key, lfu.value), (b("a"), Value::String(b("1"))));
    assert!(lfu.freq.is_some() && lfu.idle_secs.is_none());
    let lru = entry(file_fixtures::LRU);
    assert!(lru.idle_secs.is_some() && lru.freq.is_none());
    let plain = entry(file_fixtures::NO_CHECKSUM);
    assert_eq!(plain.value, Value::String(b("1")));
    let empty = items(&hex(file_fixtures::EMPTY)).unwrap();
    assert!(empty.iter().all(|i| !matches!(i, Item::Key(_))));
    // The zero trailer is not checked; a wrong non-zero one is.
    let mut data = hex(file_fixtures::NO_CHECKSUM);
    assert!(data.ends_with(&[0; 8]));
    let n = data.len();
    data[n - 1] = 1;
    assert!(matches!(items(&data), Err(FileError::Checksum { .. })));
}

#[test]
fn streams_load_through_the_stream_codec() {
    let all = items(&hex(file_fixtures::STREAM)).unwrap();
    let streams: Vec<_> = all
        .iter()
        .filter_map(|i| match i {
            Item::Key(e) => match &e.value {
                Value::Stream(s) => Some(s),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(streams.len(), 1, "{all:?}");
    assert_eq!(streams[0].len(), 1);
}

/// A file of `version` whose body is `body`, with EOF and a good trailer.
fn file(version: u16, body: &[u8]) -> Vec<u8> {
    let mut f = format!("REDIS{version:04}").into_bytes();
    f.extend_from_slice(body);
    f.push(opcode::EOF);
    let crc = crc64::crc64(&f);
    f.extend_from_slice(&crc.to_le_bytes());
    f
}

#[test]
fn versions_and_opcodes() {
    // EXPIRETIME (seconds), as Redis before 2.6 wrote it, and a version-3 file (no trailer).
    let mut body = vec![opcode::EXPIRETIME];
    body.extend_from_slice(&2_000_000_000u32.to_le_bytes());
    body.extend_from_slice(&[0, 1, b'k', 1, b'v']);
    let k = keys(&file(9, &body));
    assert_eq!(
        k[&(0, b("k"))],
        (Value::String(b("v")), Some(2_000_000_000_000))
    );
    let mut old = b"REDIS0003".to_vec();
    old.extend_from_slice(&[0, 1, b'k', 1, b'v', opcode::EOF]);
    assert_eq!(keys(&old).len(), 1);
    // RESIZEDB and a 14-bit database number.
    let f = file(10, &[opcode::SELECTDB, 0x40, 200, opcode::RESIZEDB, 1, 0]);
    assert_eq!(
        items(&f).unwrap(),
        vec![
            Item::SelectDb(200),
            Item::ResizeDb {
                keys: 1,
                expires: 0
            }
        ]
    );
    // Versions outside 1..=12 are refused with their number.
    assert_eq!(items(&file(13, &[])), Err(FileError::Version(13)));
    assert_eq!(items(&file(0, &[])), Err(FileError::Version(0)));
    assert_eq!(items(b"REDIX0009"), Err(FileError::Magic));
    assert_eq!(items(b"REDIS00a9"), Err(FileError::Magic));
    assert!(items(&file(12, &[])).unwrap().is_empty());
    // Module aux data, module values and the pre-release function format are refused.
    assert!(matches!(
        items(&file(10, &[opcode::MODULE_AUX, 0])),
        Err(FileError::Unsupported(opcode::MODULE_AUX, _))
    ));
    assert!(matches!(
        items(&file(10, &[types::MODULE_2, 1, b'k', 0])),
        Err(FileError::Unsupported(types::MODULE_2, _))
    ));
    assert!(matches!(
        items(&file(10, &[opcode::FUNCTION_PRE_GA, 0])),
        Err(FileError::Corrupt { .. })
    ));
    assert_eq!(
        items(&file(10, &[99, 1, b'k', 0])),
        Err(FileError::UnknownType(99))
    );
}

#[test]
fn every_truncation_is_an_error() {
    let data = hex(file_fixtures::EVERY_TYPE);
    for n in 0..data.len() {
        let r = items(&data[..n]);
        assert!(r.is_err(), "prefix of {n} bytes read as a whole file");
    }
}

#[test]
fn every_bit_flip_is_an_error() {
    let data = hex(file_fixtures::EVERY_TYPE);
    for i in 0..data.len() {
        for bit in 0..8 {
            let mut d = data.clone();
            d[i] ^= 1 << bit;
            assert!(items(&d).is_err(), "flip of bit {bit} of byte {i} accepted");
        }
    }
}

#[test]
fn lying_lengths_allocate_nothing_big() {
    // A 4 GiB-long string announced by 6 bytes, and a 2^60 element list.
    let mut body = vec![types::STRING, 1, b'k', 0x80];
    body.extend_from_slice(&0x1000_0000u32.to_be_bytes());
    assert!(matches!(
        items(&file(9, &body)),
        Err(FileError::Truncated { .. })
    ));
    let mut body = vec![types::LIST, 1, b'k', 0x81];
    body.extend_from_slice(&(1u64 << 60).to_be_bytes());
    assert!(items(&file(9, &body)).is_err());
    let mut body = vec![types::STRING, 1, b'k', 0x81];
    body.extend_from_slice(&(1u64 << 40).to_be_bytes());
    assert!(matches!(
        items(&file(9, &body)),
        Err(FileError::Corrupt { .. })
    ));
}
