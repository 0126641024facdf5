//! The geo commands over TCP, with replies read from redis-server 7.0.15 for the same
//! commands: scores, positions, hashes, distances, searches by radius and box (from a
//! position and from a member), STORE/STOREDIST, RESP3 doubles and Redis's error texts.

mod common;

use common::{start, Client, V};

fn int(n: i64) -> V {
    V::Int(n)
}

fn sicily(c: &mut Client) {
    assert_eq!(
        c.q(&[
            "GEOADD",
            "Sicily",
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
        ]),
        int(2)
    );
    assert_eq!(
        c.q(&[
            "GEOADD",
            "Sicily",
            "12.758489",
            "38.788135",
            "edge1",
            "17.241510",
            "38.788135",
            "edge2",
        ]),
        int(2)
    );
}

#[test]
fn geoadd_stores_redis_scores_and_reads_them_back() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    sicily(&mut c);
    assert_eq!(
        c.q(&["ZSCORE", "Sicily", "Palermo"]),
        V::bulk("3479099956230698")
    );
    assert_eq!(
        c.q(&["GEOPOS", "Sicily", "Palermo", "nosuch"]),
        V::Array(vec![
            V::arr(&["13.36138933897018433", "38.11555639549629859"]),
            V::NilArray
        ])
    );
    assert_eq!(
        c.q(&["GEOHASH", "Sicily", "Palermo", "Catania", "nosuch"]),
        V::Array(vec![
            V::bulk("sqc8b49rny0"),
            V::bulk("sqdtr74hyu0"),
            V::NilBulk
        ])
    );
    assert_eq!(
        c.q(&["GEODIST", "Sicily", "Palermo", "Catania"]),
        V::bulk("166274.1516")
    );
    assert_eq!(
        c.q(&["GEODIST", "Sicily", "Palermo", "Catania", "KM"]),
        V::bulk("166.2742")
    );
    assert_eq!(c.q(&["GEODIST", "Sicily", "Palermo", "x"]), V::NilBulk);
    assert_eq!(c.q(&["GEODIST", "nokey", "a", "b"]), V::NilBulk);
    assert_eq!(c.q(&["GEOPOS", "nokey", "a"]), V::Array(vec![V::NilArray]));
    // NX, XX and CH go to ZADD.
    assert_eq!(
        c.q(&["GEOADD", "Sicily", "XX", "CH", "13", "38", "Palermo", "1", "1", "new"]),
        int(1)
    );
    assert_eq!(
        c.q(&["GEOADD", "Sicily", "NX", "13", "39", "Palermo", "1", "1", "new"]),
        int(1)
    );
    assert_eq!(
        c.q(&["GEOPOS", "Sicily", "Palermo"]),
        V::Array(vec![V::arr(&[
            "12.99999922513961792",
            "38.0000009925631943"
        ])])
    );
}

#[test]
fn searches_give_redis_results_in_redis_order() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    sicily(&mut c);
    let item = |m: &str, d: &str, x: &str, y: &str| {
        V::Array(vec![V::bulk(m), V::bulk(d), V::arr(&[x, y])])
    };
    assert_eq!(
        c.q(&[
            "GEORADIUS",
            "Sicily",
            "15",
            "37",
            "200",
            "km",
            "WITHDIST",
            "WITHCOORD",
            "ASC"
        ]),
        V::Array(vec![
            item(
                "Catania",
                "56.4413",
                "15.08726745843887329",
                "37.50266842333162032"
            ),
            item(
                "Palermo",
                "190.4424",
                "13.36138933897018433",
                "38.11555639549629859"
            ),
        ])
    );
    assert_eq!(
        c.q(&[
            "GEOSEARCH",
            "Sicily",
            "FROMLONLAT",
            "15",
            "37",
            "BYBOX",
            "400",
            "400",
            "km",
            "ASC"
        ]),
        V::arr(&["Catania", "Palermo", "edge2", "edge1"])
    );
    assert_eq!(
        c.q(&[
            "GEOSEARCH",
            "Sicily",
            "FROMMEMBER",
            "Palermo",
            "BYBOX",
            "400",
            "400",
            "km",
            "DESC",
            "WITHDIST"
        ]),
        V::Array(vec![
            V::Array(vec![V::bulk("Catania"), V::bulk("166.2742")]),
            V::Array(vec![V::bulk("edge1"), V::bulk("91.4007")]),
            V::Array(vec![V::bulk("Palermo"), V::bulk("0.0000")]),
        ])
    );
    assert_eq!(
        c.q(&[
            "GEORADIUSBYMEMBER",
            "Sicily",
            "Palermo",
            "300",
            "km",
            "STORE",
            "dst"
        ]),
        int(3)
    );
    assert_eq!(
        c.q(&["ZRANGE", "dst", "0", "-1", "WITHSCORES"]),
        V::arr(&[
            "Palermo",
            "3479099956230698",
            "edge1",
            "3479273021651468",
            "Catania",
            "3479447370796909"
        ])
    );
    assert_eq!(
        c.q(&[
            "GEOSEARCHSTORE",
            "d2",
            "Sicily",
            "FROMMEMBER",
            "Catania",
            "BYBOX",
            "500",
            "300",
            "km",
            "DESC",
            "COUNT",
            "3",
            "STOREDIST"
        ]),
        int(3)
    );
    assert_eq!(
        c.q(&["ZRANGE", "d2", "0", "-1", "WITHSCORES"]),
        V::arr(&[
            "Palermo",
            "166.27415156960032",
            "edge2",
            "236.52917986494552",
            "edge1",
            "248.86094134114018"
        ])
    );
    assert_eq!(
        c.q(&[
            "GEOSEARCH",
            "Sicily",
            "FROMLONLAT",
            "15",
            "37",
            "BYRADIUS",
            "200",
            "km",
            "COUNT",
            "1",
            "ANY",
            "WITHHASH"
        ]),
        V::Array(vec![V::Array(vec![
            V::bulk("Palermo"),
            int(3479099956230698)
        ])])
    );
    // A missing source: an empty array, and STORE deletes the destination.
    assert_eq!(
        c.q(&[
            "GEOSEARCH",
            "nokey",
            "FROMMEMBER",
            "x",
            "BYRADIUS",
            "1",
            "km"
        ]),
        V::Array(vec![])
    );
    assert_eq!(
        c.q(&["GEORADIUS", "nokey", "1", "1", "1", "km", "STORE", "dst"]),
        int(0)
    );
    assert_eq!(c.q(&["EXISTS", "dst"]), int(0));
}

#[test]
fn resp3_coordinates_are_doubles() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    sicily(&mut c);
    c.q(&["HELLO", "3"]);
    assert_eq!(
        c.q(&["GEOPOS", "Sicily", "Palermo", "nosuch"]),
        V::Array(vec![
            V::Array(vec![
                V::Double("13.36138933897018433".into()),
                V::Double("38.11555639549629859".into())
            ]),
            V::Null
        ])
    );
    assert_eq!(c.q(&["GEODIST", "Sicily", "a", "b"]), V::Null);
}

#[test]
fn errors_are_redis_errors() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    sicily(&mut c);
    let cases: &[(&[&str], &str)] = &[
        (
            &["GEOADD", "g", "200", "100", "x"],
            "ERR invalid longitude,latitude pair 200.000000,100.000000",
        ),
        (&["GEOADD", "g", "abc", "1", "x"], "ERR value is not a valid float"),
        (&["GEOADD", "g", "NX", "XX", "1", "1", "x"], "ERR syntax error"),
        (&["GEOADD", "g", "CH", "1", "1"], "ERR syntax error"),
        (
            &["GEODIST", "Sicily", "a", "b", "xx"],
            "ERR unsupported unit provided. please use M, KM, FT, MI",
        ),
        (&["GEODIST", "Sicily", "a", "b", "km", "x"], "ERR syntax error"),
        (&["GEORADIUS", "Sicily", "15", "37", "-1", "km"], "ERR radius cannot be negative"),
        (&["GEORADIUS", "Sicily", "15", "37", "abc", "km"], "ERR need numeric radius"),
        (
            &["GEOSEARCH", "Sicily", "FROMMEMBER", "nosuch", "BYRADIUS", "1", "km"],
            "ERR could not decode requested zset member",
        ),
        (
            &["GEOSEARCH", "Sicily", "BYBOX", "1", "-1", "km", "FROMLONLAT", "1", "1"],
            "ERR height or width cannot be negative",
        ),
        (
            &["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km", "COUNT", "0"],
            "ERR COUNT must be > 0",
        ),
        (
            &["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km", "ANY"],
            "ERR the ANY argument requires COUNT argument",
        ),
        (
            &["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "FROMMEMBER", "Palermo", "BYRADIUS",
              "1", "km"],
            "ERR syntax error",
        ),
        (
            &["geosearch", "Sicily", "BYRADIUS", "1", "km", "ASC", "ASC"],
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for geosearch",
        ),
        (
            &["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "ASC", "ASC"],
            "ERR exactly one of BYRADIUS and BYBOX can be specified for GEOSEARCH",
        ),
        (
            &["GEOSEARCHSTORE", "d", "Sicily", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km",
              "WITHDIST"],
            "ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
        ),
        (
            &["GEORADIUS", "Sicily", "1", "1", "1", "km", "STORE", "x", "WITHCOORD"],
            "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
        ),
        (&["GEORADIUS_RO", "Sicily", "1", "1", "1", "km", "STORE", "x"], "ERR syntax error"),
        (
            &["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km", "STORE", "x"],
            "ERR syntax error",
        ),
        (
            &["GEOSEARCH", "Sicily", "BYBOX", "abc", "1", "km", "FROMLONLAT", "1", "1"],
            "ERR need numeric width",
        ),
        (
            &["GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "abc"],
            "ERR value is not an integer or out of range",
        ),
    ];
    for (args, err) in cases {
        assert_eq!(c.q(args), V::err(err), "{args:?}");
    }
    c.q(&["SET", "s", "1"]);
    assert_eq!(
        c.q(&["GEORADIUS", "s", "1000", "1", "1", "km"]),
        V::err("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
}
