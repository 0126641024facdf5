//! Regressions found by the differential test against a real redis-server 7.0
//! (`tests/redis/test_differential.py` at the repository root): each case is the shrunk
//! command sequence it printed, with Redis's replies.

mod common;

use common::{start, Client, V};

#[test]
fn select_out_of_int_range_names_the_range() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let range = "ERR value is out of range, value must between -2147483648 and 2147483647";
    assert_eq!(c.q(&["SELECT", "2147483648"]), V::err(range));
    assert_eq!(c.q(&["SELECT", "-2147483649"]), V::err(range));
    assert_eq!(
        c.q(&["SELECT", "9223372036854775808"]),
        V::err("ERR value is not an integer or out of range")
    );
    assert_eq!(c.q(&["SELECT", "2147483647"]), V::err("ERR DB index is out of range"));
}
