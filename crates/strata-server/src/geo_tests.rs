//! Geohash values captured from redis-server 7.0.15 (GEOADD, ZSCORE, GEOPOS, GEOHASH,
//! GEODIST and GEOSEARCH replies).

use super::*;

/// (longitude, latitude) given to GEOADD, the score Redis stored, GEOPOS's reply and
/// GEOHASH's reply.
const POINTS: &[(f64, f64, u64, &str, &str, &str)] = &[
    (
        13.361389,
        38.115556,
        3479099956230698,
        "13.36138933897018433",
        "38.11555639549629859",
        "sqc8b49rny0",
    ),
    (
        15.087269,
        37.502669,
        3479447370796909,
        "15.08726745843887329",
        "37.50266842333162032",
        "sqdtr74hyu0",
    ),
    (
        -122.4194,
        37.7749,
        1367859919124626,
        "-122.41940170526504517",
        "37.77490001056577995",
        "9q8yyk8ytp0",
    ),
    (
        179.9999,
        -85.05112878,
        3002399751579810,
        "179.99990075826644897",
        "-85.05112751263942528",
        "pbzupuzvm80",
    ),
    (
        -180.0,
        85.05112878,
        4503599627370496,
        "-179.99999731779098511",
        "85.0511287799999991",
        "bp05b5048p0",
    ),
    (
        0.0,
        0.0,
        3377699720527872,
        "0.00000268220901489",
        "0.00000126736058093",
        "s0000000000",
    ),
];

#[test]
fn encode_decode_and_hash_strings_match_redis() {
    for &(lon, lat, score, plon, plat, hash) in POINTS {
        assert_eq!(score_of(lon, lat), Some(score), "score of {lon},{lat}");
        let (x, y) = position_of(score as f64);
        assert_eq!((human(x).as_str(), human(y).as_str()), (plon, plat));
        assert_eq!(
            &hash_string(x, y),
            hash.as_bytes(),
            "geohash of {lon},{lat}"
        );
    }
}

#[test]
fn out_of_range_positions_are_refused() {
    assert_eq!(score_of(200.0, 100.0), None);
    assert_eq!(score_of(0.0, 85.06), None);
    assert_eq!(score_of(-180.1, 0.0), None);
    assert!(score_of(180.0, -85.05112878).is_some());
}

#[test]
fn scores_set_with_zadd_decode_as_redis_decodes_them() {
    // ZADD g 1e20 huge -5 neg; GEOPOS g huge neg; GEOHASH g huge neg.
    let (x, y) = position_of(1e20);
    assert_eq!(
        (human(x).as_str(), human(y).as_str()),
        ("-179.99999731779098511", "-85.05112751263942528")
    );
    assert_eq!(&hash_string(x, y), b"00bh0hbj200");
    let (x, y) = position_of(-5.0);
    assert_eq!(
        (human(x).as_str(), human(y).as_str()),
        ("180", "85.0511287799999991")
    );
    assert_eq!(&hash_string(x, y), b"bp05b5048p0");
}

#[test]
fn distances_match_redis() {
    let pos = |i: usize| position_of(POINTS[i].2 as f64);
    let d = |a: usize, b: usize, unit: f64| {
        let ((x1, y1), (x2, y2)) = (pos(a), pos(b));
        distance_text(distance(x1, y1, x2, y2) / unit)
    };
    assert_eq!(d(0, 1, 1.0), "166274.1516");
    assert_eq!(d(0, 2, 1000.0), "10441.3928");
    assert_eq!(d(3, 4, 1609.34), "11756.2756");
    assert_eq!(d(5, 2, 0.3048), "41991559.2235");
    // Same longitude: the latitude-only formula.
    assert_eq!(distance(10.0, 0.0, 10.0, 1.0), lat_distance(0.0, 1.0));
}

#[test]
fn neighbours_are_the_adjacent_cells_and_wrap_around() {
    let h = encode_wgs84(13.361389, 38.115556, 10).unwrap();
    let n = neighbors(h);
    let (a, e, w, no, so) = (
        decode(h),
        decode(n.east),
        decode(n.west),
        decode(n.north),
        decode(n.south),
    );
    assert_eq!(e.longitude.min, a.longitude.max);
    assert_eq!(w.longitude.max, a.longitude.min);
    assert_eq!(no.latitude.min, a.latitude.max);
    assert_eq!(so.latitude.max, a.latitude.min);
    assert_eq!(e.latitude, a.latitude);
    assert_eq!(neighbors(n.east).west, h);
    assert_eq!(neighbors(n.north_east).south_west, h);
    // The east neighbour of the last cell before the antimeridian is the first one.
    let last = encode_wgs84(179.99, 0.0, 4).unwrap();
    let first = encode_wgs84(-179.99, 0.0, 4).unwrap();
    assert_eq!(neighbors(last).east, first);
    assert_eq!(neighbors(first).west, last);
}

#[test]
fn steps_follow_the_radius_and_the_latitude() {
    assert_eq!(steps_by_radius(0.0, 0.0), 26);
    assert_eq!(steps_by_radius(200_000.0, 37.0), 6);
    assert_eq!(steps_by_radius(200_000.0, 70.0), 5);
    assert_eq!(steps_by_radius(200_000.0, -81.0), 4);
    assert_eq!(steps_by_radius(1e9, 0.0), 1);
    assert_eq!(steps_by_radius(0.001, 0.0), 26);
}

/// GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 200 km, and BYBOX 400 400 km from Palermo, over
/// the points above: the same members within the shape, at Redis's distances.
#[test]
fn searches_find_what_redis_finds() {
    let s = Search {
        lon: 15.0,
        lat: 37.0,
        shape: Shape::Radius(200.0),
        conversion: 1000.0,
    };
    let found = search_points(&s);
    assert_eq!(found, vec![(1, "56.4413".into()), (0, "190.4424".into())]);
    let (x, y) = position_of(POINTS[0].2 as f64);
    let b = Search {
        lon: x,
        lat: y,
        shape: Shape::Box(400.0, 400.0),
        conversion: 1000.0,
    };
    assert_eq!(
        search_points(&b),
        vec![(0, "0.0000".into()), (1, "166.2742".into())]
    );
}

/// The points of [`POINTS`] in the search's cells and shape, nearest first.
fn search_points(s: &Search) -> Vec<(usize, String)> {
    let cells = s.cells();
    let mut out = Vec::new();
    for (i, p) in POINTS.iter().enumerate() {
        let in_cell = cells.iter().any(|c| {
            let (lo, hi) = c.score_range();
            !c.is_zero() && p.2 >= lo && p.2 < hi
        });
        let (x, y) = position_of(p.2 as f64);
        if let (true, Some(d)) = (in_cell, s.within(x, y)) {
            out.push((i, d));
        }
    }
    out.sort_by(|a, b| a.1.total_cmp(&b.1));
    out.into_iter()
        .map(|(i, d)| (i, distance_text(d / s.conversion)))
        .collect()
}
