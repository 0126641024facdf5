//! MONITOR over TCP: every command of every client as a status line with the time, the
//! database, the client's address and the quoted arguments; admin commands and rejected
//! ones are left out, AUTH's password is redacted, a script's commands follow it as `lua`.
//! The lines are compared with redis-server's by `tests/redis/test_notify.py`.

mod common;

use common::{start, Client, V};

/// The next monitor line without its time, which must have Redis's form.
fn line(m: &mut Client) -> String {
    let V::Simple(text) = m.read() else {
        panic!("not a status line")
    };
    let (stamp, rest) = text.split_once(' ').unwrap();
    let (secs, micros) = stamp.split_once('.').unwrap();
    assert!(secs.parse::<u64>().unwrap() > 1_600_000_000);
    assert_eq!(micros.len(), 6);
    rest.to_string()
}

#[test]
fn monitor_shows_every_clients_commands() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut m = Client::connect(s.local_addr());
    assert_eq!(m.q(&["MONITOR"]), V::ok());
    let mut c = Client::connect(s.local_addr());
    let addr = match c.q(&["CLIENT", "INFO"]) {
        V::Bulk(b) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    };
    let addr = addr
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap()
        .to_string();
    c.q(&["SET", "k", "a b\"\n"]);
    c.q(&["AUTH", "pw"]);
    c.q(&["NOSUCH"]);
    c.q(&["EVAL", "return redis.call('GET', KEYS[1])", "1", "k"]);
    c.q(&["SELECT", "2"]);
    match c.q(&["CLIENT", "LIST"]) {
        V::Bulk(b) => {
            let list = String::from_utf8(b).unwrap();
            assert!(list.lines().any(|l| l.contains(" flags=O ")), "{list}");
        }
        other => panic!("{other:?}"),
    }
    // CLIENT INFO is not an admin command: shown, as in Redis.
    assert_eq!(line(&mut m), format!("[0 {addr}] \"CLIENT\" \"INFO\""));
    assert_eq!(
        line(&mut m),
        format!("[0 {addr}] \"SET\" \"k\" \"a b\\\"\\n\"")
    );
    assert_eq!(line(&mut m), format!("[0 {addr}] \"AUTH\" \"(redacted)\""));
    assert_eq!(
        line(&mut m),
        format!("[0 {addr}] \"EVAL\" \"return redis.call('GET', KEYS[1])\" \"1\" \"k\"")
    );
    assert_eq!(line(&mut m), "[0 lua] \"GET\" \"k\"");
    assert_eq!(line(&mut m), format!("[2 {addr}] \"SELECT\" \"2\""));
    // CLIENT LIST is an admin command: not shown.
    // A monitor that leaves stops receiving; the others go on.
    drop(m);
    assert_eq!(c.q(&["PING"]), V::Simple("PONG".into()));
    s.shutdown().unwrap();
}
