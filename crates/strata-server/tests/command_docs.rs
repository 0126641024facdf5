//! COMMAND DOCS replies each command's argument syntax in Redis 7.0's shape (redis-cli's
//! `help` and typing hints are built from it). The expected replies below are redis-server
//! 7.0.15's, rendered with `show`.

mod common;

use common::{start, Client, V};

/// A reply as one line: bulk strings bare, `+simple`, `:int`, `[array]`, `{map}`, `~(set)`.
fn show(v: &V) -> String {
    let list = |items: &mut dyn Iterator<Item = String>| items.collect::<Vec<_>>().join(" ");
    match v {
        V::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        V::Simple(s) => format!("+{s}"),
        V::Int(n) => format!(":{n}"),
        V::Array(a) => format!("[{}]", list(&mut a.iter().map(show))),
        V::Set(a) => format!("~({})", list(&mut a.iter().map(show))),
        V::Map(m) => format!(
            "{{{}}}",
            list(&mut m.iter().map(|(k, v)| format!("{}={}", show(k), show(v))))
        ),
        other => format!("{other:?}"),
    }
}

/// The `arguments` field of each command's docs, by command name.
fn doc_arguments(c: &mut Client, names: &[&str]) -> Vec<(String, String)> {
    let mut cmd = vec!["COMMAND", "DOCS"];
    cmd.extend(names);
    let reply = c.q(&cmd);
    // RESP2 flattens maps into arrays of pairs.
    let pairs = |v: &V| -> Vec<(V, V)> {
        match v {
            V::Map(m) => m.clone(),
            V::Array(a) => a.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect(),
            other => panic!("not a map: {other:?}"),
        }
    };
    pairs(&reply)
        .into_iter()
        .map(|(name, doc)| {
            let args = pairs(&doc)
                .into_iter()
                .find(|(k, _)| *k == V::bulk("arguments"))
                .map(|(_, v)| show(&v))
                .unwrap_or_default();
            (show(&name), args)
        })
        .collect()
}

const GET3: &str = "[{name=key type=key key_spec_index=:0}]";
const SET3: &str = "[{name=key type=key key_spec_index=:0} {name=value type=string} \
{name=condition type=oneof since=2.6.12 flags=~(+optional) arguments=[\
{name=nx type=pure-token token=NX} {name=xx type=pure-token token=XX}]} \
{name=get type=pure-token token=GET since=6.2.0 flags=~(+optional)} \
{name=expiration type=oneof flags=~(+optional) arguments=[\
{name=seconds type=integer token=EX since=2.6.12} \
{name=milliseconds type=integer token=PX since=2.6.12} \
{name=unix-time-seconds type=unix-time token=EXAT since=6.2.0} \
{name=unix-time-milliseconds type=unix-time token=PXAT since=6.2.0} \
{name=keepttl type=pure-token token=KEEPTTL since=6.0.0}]}]";
const MSET3: &str = "[{name=key_value type=block flags=~(+multiple) arguments=[\
{name=key type=key key_spec_index=:0} {name=value type=string}]}]";
const CLIENT_KILL3: &str = "[{name=filter type=oneof arguments=[\
{name=ip:port type=string deprecated_since=2.8.12} \
{name=new-format type=oneof flags=~(+multiple) arguments=[\
{name=client-id type=integer token=ID since=2.8.12 flags=~(+optional)} \
{name=normal_master_slave_pubsub type=oneof token=TYPE since=2.8.12 flags=~(+optional) \
arguments=[{name=normal type=pure-token token=NORMAL} \
{name=master type=pure-token token=MASTER since=3.2.0} \
{name=slave type=pure-token token=SLAVE} \
{name=replica type=pure-token token=REPLICA since=5.0.0} \
{name=pubsub type=pure-token token=PUBSUB}]} \
{name=username type=string token=USER flags=~(+optional)} \
{name=ip:port type=string token=ADDR flags=~(+optional)} \
{name=ip:port type=string token=LADDR since=6.2.0 flags=~(+optional)} \
{name=yes/no type=string token=SKIPME flags=~(+optional)}]}]}]";

#[test]
fn command_docs_arguments_match_redis() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert!(matches!(c.q(&["HELLO", "3"]), V::Map(_)));
    let got = doc_arguments(&mut c, &["get", "set", "mset", "client|kill", "ping"]);
    let want = [
        ("get", GET3),
        ("set", SET3),
        ("mset", MSET3),
        ("client|kill", CLIENT_KILL3),
        ("ping", "[{name=message type=string flags=~(+optional)}]"),
    ];
    assert_eq!(got.len(), want.len());
    for ((name, args), (want_name, want_args)) in got.iter().zip(want) {
        assert_eq!(name, want_name);
        assert_eq!(args, want_args, "{name}");
    }
    // A command without arguments has no `arguments` field.
    assert_eq!(
        doc_arguments(&mut c, &["dbsize"]),
        [("dbsize".into(), String::new())]
    );

    // A deprecated command says so, and what replaces it.
    let V::Map(docs) = c.q(&["COMMAND", "DOCS", "getset"]) else {
        panic!()
    };
    let V::Map(getset) = &docs[0].1 else { panic!() };
    let field = |k: &str| {
        getset
            .iter()
            .find(|(f, _)| *f == V::bulk(k))
            .map(|(_, v)| show(v))
    };
    assert_eq!(field("doc_flags").as_deref(), Some("~(+deprecated)"));
    assert_eq!(field("deprecated_since").as_deref(), Some("6.2.0"));
    assert_eq!(
        field("replaced_by").as_deref(),
        Some("`SET` with the `!GET` argument")
    );

    // RESP2: maps are flat arrays and sets arrays; flags stay simple strings.
    assert!(matches!(c.q(&["HELLO", "2"]), V::Array(_)));
    let got = doc_arguments(&mut c, &["get", "mset"]);
    assert_eq!(got[0].1, "[[name key type key key_spec_index :0]]");
    assert_eq!(
        got[1].1,
        "[[name key_value type block flags [+multiple] arguments \
         [[name key type key key_spec_index :0] [name value type string]]]]"
    );
    s.shutdown().unwrap();
}

/// COMMAND INFO's key specs and COMMAND GETKEYS(ANDFLAGS) come from the same table entries
/// the server routes and locks by; the expected replies are redis-server 7.0.15's.
#[test]
fn key_specs_and_getkeys_match_redis() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert!(matches!(c.q(&["HELLO", "3"]), V::Map(_)));
    let V::Array(info) = c.q(&["COMMAND", "INFO", "zunionstore"]) else {
        panic!()
    };
    let V::Array(z) = &info[0] else { panic!() };
    assert_eq!(
        show(&z[2]),
        "~(+write +denyoom +movablekeys)",
        "flags, movablekeys included"
    );
    assert_eq!(
        show(&z[8]),
        "~({flags=~(+OW +update) begin_search={type=index spec={index=:1}} \
         find_keys={type=range spec={lastkey=:0 keystep=:1 limit=:0}}} \
         {flags=~(+RO +access) begin_search={type=index spec={index=:2}} \
         find_keys={type=keynum spec={keynumidx=:0 firstkey=:1 keystep=:1}}})"
    );
    let q = |c: &mut Client, line: &str| {
        let mut args = vec!["COMMAND"];
        args.extend(line.split(' '));
        show(&c.q(&args))
    };
    assert_eq!(q(&mut c, "GETKEYS zunionstore d 2 a b"), "[d a b]");
    assert_eq!(
        q(&mut c, "GETKEYSANDFLAGS set k v get"),
        "[[k ~(+RW +access +update)]]"
    );
    assert_eq!(q(&mut c, "GETKEYSANDFLAGS set k v"), "[[k ~(+OW +update)]]");
    assert_eq!(q(&mut c, "GETKEYS mset a 1 b 2"), "[a b]");
    assert_eq!(q(&mut c, "GETKEYS lmpop 2 a b left"), "[a b]");
    for (line, err) in [
        (
            "GETKEYS zunionstore d x a",
            "Invalid arguments specified for command",
        ),
        (
            "GETKEYS get a b",
            "Invalid number of arguments specified for command",
        ),
        ("GETKEYS ping x", "The command has no key arguments"),
        ("GETKEYS nosuch k", "Invalid command specified"),
    ] {
        assert_eq!(
            q(&mut c, line),
            format!("{:?}", V::err(&format!("ERR {err}")))
        );
    }
    s.shutdown().unwrap();
}
