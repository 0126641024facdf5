//! ACL users over TCP: a user limited to `~app:*` and `+@read` cannot read other keys,
//! write, or run admin commands, through plain commands, pipelines, MULTI and scripts;
//! denials are logged; AUTH and HELLO authenticate as users; deleting a user closes its
//! connections; the ACL file loads, refuses errors and saves.

mod common;

use common::{encode, start, Client, V};

const NOPERM_KEY: &str =
    "NOPERM this user has no permissions to access one of the keys used as arguments";

fn noperm_cmd(name: &str) -> V {
    V::err(&format!(
        "NOPERM this user has no permissions to run the '{name}' command"
    ))
}

/// A connection authenticated as `app` (`~app:* +@read` plus what transactions and
/// scripts need).
fn app_client(addr: std::net::SocketAddr) -> Client {
    let mut c = Client::connect(addr);
    assert_eq!(c.q(&["AUTH", "app", "pw"]), V::ok());
    c
}

fn setup(admin: &mut Client) {
    assert_eq!(
        admin.q(&[
            "ACL", "SETUSER", "app", "on", ">pw", "~app:*", "&news", "+@read", "+multi", "+exec",
            "+eval", "+publish",
        ]),
        V::ok()
    );
    assert_eq!(admin.q(&["SET", "app:1", "v"]), V::ok());
    assert_eq!(admin.q(&["SET", "other", "secret"]), V::ok());
}

#[test]
fn limited_user_through_every_path() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut admin = Client::connect(s.local_addr());
    setup(&mut admin);
    let mut c = app_client(s.local_addr());
    assert_eq!(c.q(&["ACL", "WHOAMI"]), noperm_cmd("acl|whoami"));
    // Plain commands.
    assert_eq!(c.q(&["GET", "app:1"]), V::bulk("v"));
    assert_eq!(c.q(&["GET", "other"]), V::err(NOPERM_KEY));
    assert_eq!(c.q(&["MGET", "app:1", "other"]), V::err(NOPERM_KEY));
    assert_eq!(c.q(&["SET", "app:1", "x"]), noperm_cmd("set"));
    assert_eq!(c.q(&["CONFIG", "GET", "port"]), noperm_cmd("config|get"));
    assert_eq!(c.q(&["FLUSHALL"]), noperm_cmd("flushall"));
    assert_eq!(c.q(&["PUBLISH", "news", "m"]), V::Int(0));
    assert_eq!(
        c.q(&["PUBLISH", "gossip", "m"]),
        V::err(
            "NOPERM this user has no permissions to access one of the channels used as arguments"
        )
    );
    // A pipeline: each command checked on its own.
    let mut pipe = encode(&[b"GET", b"app:1"]);
    pipe.extend(encode(&[b"GET", b"other"]));
    pipe.extend(encode(&[b"DEL", b"app:1"]));
    pipe.extend(encode(&[b"GET", b"app:1"]));
    c.send(&pipe);
    assert_eq!(c.read(), V::bulk("v"));
    assert_eq!(c.read(), V::err(NOPERM_KEY));
    assert_eq!(c.read(), noperm_cmd("del"));
    assert_eq!(c.read(), V::bulk("v"));
    // MULTI: refused when queued, and EXEC aborts.
    assert_eq!(c.q(&["MULTI"]), V::ok());
    assert_eq!(c.q(&["GET", "app:1"]), V::Simple("QUEUED".into()));
    assert_eq!(c.q(&["SET", "app:1", "x"]), noperm_cmd("set"));
    assert_eq!(c.q(&["GET", "other"]), V::err(NOPERM_KEY));
    assert_eq!(
        c.q(&["EXEC"]),
        V::err("EXECABORT Transaction discarded because of previous errors.")
    );
    // Scripts: redis.call checks the caller.
    assert_eq!(
        c.q(&["EVAL", "return redis.pcall('get','other')", "0"]),
        V::err("ERR The user executing the script can't access at least one of the keys mentioned in the command arguments")
    );
    assert_eq!(
        c.q(&["EVAL", "return redis.pcall('set','app:1','x')", "0"]),
        V::err("ERR The user executing the script can't run this command or subcommand")
    );
    match c.q(&["EVAL", "return redis.call('set','app:1','x')", "0"]) {
        V::Err(e) => assert!(
            e.starts_with(
                "ERR The user executing the script can't run this command or subcommand script: "
            ),
            "{e}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        c.q(&["EVAL", "return redis.call('get',KEYS[1])", "1", "app:1"]),
        V::bulk("v")
    );
    assert_eq!(
        admin.q(&["GET", "app:1"]),
        V::bulk("v"),
        "nothing was written"
    );
    // Every denial is in the log, newest first, with its reason and context.
    let V::Array(entries) = admin.q(&["ACL", "LOG"]) else {
        panic!("ACL LOG is an array")
    };
    let fields: Vec<(String, String, String)> = entries
        .iter()
        .map(|e| {
            let V::Array(kv) = e else { panic!("{e:?}") };
            let get = |k: &str| {
                let i = kv.iter().position(|x| *x == V::bulk(k)).unwrap();
                match &kv[i + 1] {
                    V::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                    other => panic!("{other:?}"),
                }
            };
            (get("reason"), get("context"), get("object"))
        })
        .collect();
    let want = |r: &str, c: &str, o: &str| (r.to_string(), c.to_string(), o.to_string());
    assert_eq!(fields[0], want("command", "lua", "set"));
    assert_eq!(fields[1], want("key", "lua", "other"));
    assert!(fields.contains(&want("command", "multi", "set")));
    assert!(fields.contains(&want("key", "multi", "other")));
    assert!(fields.contains(&want("command", "toplevel", "del")));
    assert!(fields.contains(&want("channel", "toplevel", "gossip")));
    assert!(fields.contains(&want("command", "toplevel", "config|get")));
    assert_eq!(admin.q(&["ACL", "LOG", "RESET"]), V::ok());
    assert_eq!(admin.q(&["ACL", "LOG"]), V::Array(vec![]));
    // Rules changed under a connection apply to its next command.
    assert_eq!(admin.q(&["ACL", "SETUSER", "app", "+set"]), V::ok());
    assert_eq!(c.q(&["SET", "app:2", "x"]), V::ok());
    assert_eq!(c.q(&["SET", "other", "x"]), V::err(NOPERM_KEY));
    s.shutdown().unwrap();
}

#[test]
fn selectors_and_read_write_patterns() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut admin = Client::connect(s.local_addr());
    assert_eq!(
        admin.q(&[
            "ACL", "SETUSER", "u", "on", "nopass", "+@all", "%R~r:*", "%W~w:*", "(~sel:*", "+get)",
        ]),
        V::ok()
    );
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["AUTH", "u", "any"]), V::ok());
    assert_eq!(c.q(&["ACL", "WHOAMI"]), V::bulk("u"));
    assert_eq!(c.q(&["GET", "r:1"]), V::NilBulk);
    assert_eq!(c.q(&["SET", "r:1", "x"]), V::err(NOPERM_KEY));
    assert_eq!(c.q(&["SET", "w:1", "x"]), V::ok());
    assert_eq!(c.q(&["GET", "w:1"]), V::err(NOPERM_KEY));
    // The selector allows GET of its keys, not SET.
    assert_eq!(c.q(&["GET", "sel:1"]), V::NilBulk);
    assert_eq!(c.q(&["SET", "sel:1", "x"]), V::err(NOPERM_KEY));
    assert_eq!(
        admin.q(&["ACL", "DRYRUN", "u", "set", "sel:1", "x"]),
        V::bulk("This user has no permissions to access the 'sel:1' key")
    );
    assert_eq!(admin.q(&["ACL", "DRYRUN", "u", "get", "sel:1"]), V::ok());
    assert_eq!(
        admin.q(&["ACL", "LIST"]),
        V::arr(&[
            "user default on nopass ~* &* +@all",
            "user u on nopass %R~r:* %W~w:* resetchannels +@all (~sel:* resetchannels -@all +get)",
        ])
    );
    s.shutdown().unwrap();
}

#[test]
fn auth_hello_requirepass_and_deleting_users() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &["--requirepass", "top"]);
    let mut admin = Client::connect(s.local_addr());
    assert_eq!(
        admin.q(&["GET", "k"]),
        V::err("NOAUTH Authentication required.")
    );
    assert_eq!(admin.q(&["AUTH", "top"]), V::ok());
    assert_eq!(
        admin.q(&["ACL", "SETUSER", "bob", "on", ">b", "allkeys", "+@all"]),
        V::ok()
    );
    let mut bob = Client::connect(s.local_addr());
    assert_eq!(
        bob.q(&["AUTH", "bob", "wrong"]),
        V::err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert!(matches!(
        bob.q(&["HELLO", "3", "AUTH", "bob", "b"]),
        V::Map(_)
    ));
    assert_eq!(bob.q(&["ACL", "WHOAMI"]), V::bulk("bob"));
    // The failed AUTH is logged.
    let V::Array(log) = admin.q(&["ACL", "LOG", "1"]) else {
        panic!()
    };
    let V::Array(kv) = &log[0] else { panic!() };
    assert_eq!(kv[3], V::bulk("auth"));
    assert_eq!(kv[7], V::bulk("AUTH"), "the command as sent");
    assert_eq!(kv[9], V::bulk("bob"));
    // CONFIG SET requirepass is the default user's password.
    assert_eq!(admin.q(&["CONFIG", "SET", "requirepass", "new"]), V::ok());
    let mut d = Client::connect(s.local_addr());
    assert_eq!(
        d.q(&["AUTH", "top"]),
        V::err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert_eq!(d.q(&["AUTH", "default", "new"]), V::ok());
    // Deleting a user closes its connections.
    assert_eq!(
        admin.q(&["ACL", "DELUSER", "default"]),
        V::err("ERR The 'default' user cannot be removed")
    );
    assert_eq!(admin.q(&["ACL", "DELUSER", "bob", "nobody"]), V::Int(1));
    assert!(bob.closed());
    s.shutdown().unwrap();
}

#[test]
fn acl_file_load_save_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let acl = dir.path().join("users.acl");
    std::fs::write(
        &acl,
        "user default on nopass ~* &* +@all\nuser a on >x ~k* +get\n",
    )
    .unwrap();
    let data = dir.path().join("data");
    let s = start(&data, &["--aclfile", acl.to_str().unwrap()]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["ACL", "USERS"]), V::arr(&["a", "default"]));
    let mut a = Client::connect(s.local_addr());
    assert_eq!(a.q(&["AUTH", "a", "x"]), V::ok());
    // A bad file is refused, naming its line; the users stay.
    std::fs::write(
        &acl,
        "user default on nopass ~* &* +@all\nuser b on +bogus\n",
    )
    .unwrap();
    let path = acl.display().to_string();
    assert_eq!(
        c.q(&["ACL", "LOAD"]),
        V::err(&format!(
            "ERR {path}:2: Error in applying operation '+bogus': Unknown command or category \
             name in ACL. WARNING: ACL errors detected, no change to the previously active \
             ACL rules was performed"
        ))
    );
    assert_eq!(a.q(&["GET", "k1"]), V::NilBulk);
    // SETUSER then SAVE writes the users as ACL LIST prints them.
    assert_eq!(
        c.q(&[
            "ACL",
            "SETUSER",
            "c",
            "on",
            "#2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881",
            "~q"
        ]),
        V::ok()
    );
    assert_eq!(c.q(&["ACL", "SAVE"]), V::ok());
    let saved = std::fs::read_to_string(&acl).unwrap();
    assert_eq!(
        saved,
        "user a on #2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881 ~k* resetchannels -@all +get\n\
         user c on #2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881 ~q resetchannels -@all\n\
         user default on nopass ~* &* +@all\n"
    );
    // LOAD of a good file replaces the users and closes their connections.
    std::fs::write(
        &acl,
        "user default on nopass ~* &* +@all\nuser c on nopass\n",
    )
    .unwrap();
    assert_eq!(c.q(&["ACL", "LOAD"]), V::ok());
    assert_eq!(c.q(&["ACL", "USERS"]), V::arr(&["c", "default"]));
    assert!(a.closed());
    s.shutdown().unwrap();
    // A server whose ACL file has an error does not start.
    std::fs::write(&acl, "user a on +nosuch\n").unwrap();
    let err = strata_server::start(
        {
            let mut cfg = strata_server::config::Config::from_args(&[
                "--port".into(),
                "0".into(),
                "--aclfile".into(),
                path.clone(),
            ])
            .unwrap();
            cfg.dir = data.clone();
            cfg
        },
        Default::default(),
    )
    .err()
    .expect("refuses to start");
    assert!(
        err.to_string()
            .contains(&format!("{path}:1: Error in applying operation '+nosuch'")),
        "{err}"
    );
}

#[test]
fn revoking_channels_closes_subscribers_that_lost_them() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut admin = Client::connect(s.local_addr());
    assert_eq!(
        admin.q(&["ACL", "SETUSER", "p", "on", ">pw", "allkeys", "+@all", "&a*"]),
        V::ok()
    );
    let mut by_pattern = Client::connect(s.local_addr());
    assert_eq!(by_pattern.q(&["AUTH", "p", "pw"]), V::ok());
    by_pattern.q(&["PSUBSCRIBE", "a*"]);
    let mut by_channel = Client::connect(s.local_addr());
    assert_eq!(by_channel.q(&["AUTH", "p", "pw"]), V::ok());
    by_channel.q(&["SUBSCRIBE", "abc"]);
    // `a*` as a pattern is no longer allowed; channel `abc` still is.
    assert_eq!(
        admin.q(&["ACL", "SETUSER", "p", "resetchannels", "&abc"]),
        V::ok()
    );
    assert!(by_pattern.closed());
    assert_eq!(
        by_channel.q(&["PING"]),
        V::Array(vec![V::bulk("pong"), V::bulk("")])
    );
    assert_eq!(admin.q(&["PUBLISH", "abc", "m"]), V::Int(1));
    s.shutdown().unwrap();
}
