//! The geo family (`cmd/geo.rs`, `geo.rs`) through the in-process harness
//! (`test_server.rs`): every reply and error text is redis-server 7.0.15's, recorded from it.

use crate::test_server::TestServer;

#[test]
fn add_distance_hash_position_search_and_wrong_types() {
    TestServer::in_memory().check(
        r#"
            GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania => :2
            GEOADD g 200 100 bad => -ERR invalid longitude,latitude pair 200.000000,100.000000
            GEOADD g NX XX 1 1 a => -ERR syntax error
            GEODIST g Palermo Catania => "166274.1516"
            GEODIST g Palermo Catania km => "166.2742"
            GEODIST g Palermo nope => (nil)
            GEODIST g Palermo Catania parsecs => -ERR unsupported unit provided. please use M, KM, FT, MI
            GEOHASH g Palermo nope => ["sqc8b49rny0", (nil)]
            GEOPOS g Palermo nope => [["13.36138933897018433", "38.11555639549629859"], (nil-array)]
            GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 200 km ASC => ["Catania", "Palermo"]
            GEOSEARCH g FROMMEMBER Palermo BYBOX 400 400 km DESC WITHDIST COUNT 1 => [["Catania", "166.2742"]]
            GEOSEARCH g FROMMEMBER nope BYRADIUS 1 km => -ERR could not decode requested zset member
            GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 200 => -ERR syntax error
            GEORADIUS g 15 37 200 km WITHDIST ASC => [["Catania", "56.4413"], ["Palermo", "190.4424"]]
            GEOSEARCHSTORE dst g FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST => :2
            ZRANGE dst 0 -1 => ["Catania", "Palermo"]
            TYPE g => +zset
            SET str v => +OK
            GEOADD str 1 1 a => -WRONGTYPE Operation against a key holding the wrong kind of value
            GEOPOS str a => -WRONGTYPE Operation against a key holding the wrong kind of value
        "#,
    );
}
