//! Geohash arithmetic as Redis does it (geohash.c, geohash_helper.c), with no protocol: a
//! position is a sorted-set score holding a 52-bit interleaved geohash (26 bits of latitude
//! in the even positions, 26 of longitude in the odd ones) over Redis's ranges — longitude
//! ±180, latitude ±85.05112878 (the Web Mercator limit). The search plan of a radius or box
//! query is the cell of the centre at an estimated precision plus its eight neighbours,
//! minus those the shape cannot reach; each cell is one score range of the sorted set.
//!
//! Every number here must come out bit for bit as Redis's C does, so the formulas keep
//! Redis's order of operations (same roundings) and its constants.
//!
//! Layer: store and types (above configuration; no services, commands or execution).

/// Redis's `GEO_STEP_MAX`: 26 bits per coordinate, 52 in a score.
pub const STEP_MAX: u8 = 26;
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;

/// Earth's quadratic mean radius for WGS-84, as Redis uses it.
pub const EARTH_RADIUS_M: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

fn deg_rad(a: f64) -> f64 {
    a * D_R
}

fn rad_deg(a: f64) -> f64 {
    a / D_R
}

/// A geohash of `step` bits per coordinate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Hash {
    pub bits: u64,
    pub step: u8,
}

impl Hash {
    /// Redis's `HASHISZERO`: a neighbour excluded from a search.
    pub fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The hash moved to 52 bits (Redis's `geohashAlign52Bits`): the cell's lowest score.
    pub fn align52(&self) -> u64 {
        self.bits << (52 - u32::from(self.step) * 2)
    }

    /// The scores of the cell: `[min, max)`.
    pub fn score_range(&self) -> (u64, u64) {
        let next = Hash {
            bits: self.bits + 1,
            step: self.step,
        };
        (self.align52(), next.align52())
    }
}

/// A coordinate range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

/// Redis's ranges for scores.
pub const LONG_RANGE: Range = Range {
    min: LONG_MIN,
    max: LONG_MAX,
};
pub const LAT_RANGE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

/// The cell a hash stands for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Area {
    pub longitude: Range,
    pub latitude: Range,
}

/// Spreads the low 32 bits of `v` to the even bit positions.
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// Gathers the even bit positions of `v` into 32 bits.
fn squash(v: u64) -> u32 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF;
    x as u32
}

/// `lat` bits in the even positions, `lon` bits in the odd ones.
pub fn interleave(lat: u32, lon: u32) -> u64 {
    spread(lat) | (spread(lon) << 1)
}

/// The inverse of [`interleave`]: `(lat, lon)`.
pub fn deinterleave(bits: u64) -> (u32, u32) {
    (squash(bits), squash(bits >> 1))
}

/// Redis's `geohashEncode`: `None` outside the ranges (or Redis's absolute limits).
pub fn encode(lon_r: Range, lat_r: Range, lon: f64, lat: f64, step: u8) -> Option<Hash> {
    if step == 0 || step > 32 {
        return None;
    }
    if !(LONG_MIN..=LONG_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_r.min || lat > lat_r.max || lon < lon_r.min || lon > lon_r.max {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_offset = (lat - lat_r.min) / (lat_r.max - lat_r.min) * scale;
    let lon_offset = (lon - lon_r.min) / (lon_r.max - lon_r.min) * scale;
    // C converts the offsets to uint32_t: truncation (the top edge gives 2^step, which
    // still fits when step < 32, as here).
    Some(Hash {
        bits: interleave(lat_offset as u32, lon_offset as u32),
        step,
    })
}

/// [`encode`] over Redis's ranges.
pub fn encode_wgs84(lon: f64, lat: f64, step: u8) -> Option<Hash> {
    encode(LONG_RANGE, LAT_RANGE, lon, lat, step)
}

/// The score of a position: its 52-bit hash (`None` outside the ranges).
pub fn score_of(lon: f64, lat: f64) -> Option<u64> {
    encode_wgs84(lon, lat, STEP_MAX).map(|h| h.align52())
}

/// Redis's `geohashDecode` over its ranges.
pub fn decode(h: Hash) -> Area {
    let (ilat, ilon) = deinterleave(h.bits);
    let scale = (1u64 << h.step) as f64;
    let lat_scale = LAT_MAX - LAT_MIN;
    let lon_scale = LONG_MAX - LONG_MIN;
    Area {
        latitude: Range {
            min: LAT_MIN + (f64::from(ilat) / scale) * lat_scale,
            // C adds 1 in 32 bits: it wraps for the bogus cells of out-of-range scores.
            max: LAT_MIN + (f64::from(ilat.wrapping_add(1)) / scale) * lat_scale,
        },
        longitude: Range {
            min: LONG_MIN + (f64::from(ilon) / scale) * lon_scale,
            max: LONG_MIN + (f64::from(ilon.wrapping_add(1)) / scale) * lon_scale,
        },
    }
}

/// The centre of a cell, clamped to the ranges: `(lon, lat)`.
pub fn area_center(a: &Area) -> (f64, f64) {
    let lon = ((a.longitude.min + a.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((a.latitude.min + a.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// The position a score stands for (Redis's `decodeGeohash`: the score converted to an
/// integer as C does, for scores in range; any double in a sorted set gives a position).
pub fn position_of(score: f64) -> (f64, f64) {
    let bits = c_to_u64(score);
    area_center(&decode(Hash {
        bits,
        step: STEP_MAX,
    }))
}

/// C's `(uint64_t)d` as gcc compiles it on x86-64 (`cvttsd2si`, whose out-of-range result
/// is 2^63), so that the scores Redis's conversion leaves undefined (negative, 2^64 and
/// above, set with ZADD) decode to the positions redis-server shows.
fn c_to_u64(d: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    let cvt = |x: f64| {
        if x > -TWO63 - 1025.0 && x < TWO63 {
            x as i64 as u64
        } else {
            1u64 << 63
        }
    };
    if d < TWO63 {
        cvt(d)
    } else {
        cvt(d - TWO63) ^ (1u64 << 63)
    }
}

/// The 11-character geohash string of a position (GEOHASH): re-encoded over the standard
/// ±90 latitude range; the 11th character is always '0' (52 bits give ten).
pub fn hash_string(lon: f64, lat: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let r_lon = Range {
        min: -180.0,
        max: 180.0,
    };
    let r_lat = Range {
        min: -90.0,
        max: 90.0,
    };
    let bits = encode(r_lon, r_lat, lon, lat, STEP_MAX).map_or(0, |h| h.bits);
    let mut out = [b'0'; 11];
    for (i, c) in out.iter_mut().enumerate().take(10) {
        let idx = (bits >> (52 - (i + 1) * 5)) & 0x1f;
        *c = ALPHABET[idx as usize];
    }
    out
}

fn move_x(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(h.step) * 2;
    let mut x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555u64 >> shift;
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    h.bits = x | y;
}

fn move_y(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(h.step) * 2;
    let x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let mut y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555_5555_5555_5555u64 >> shift;
    h.bits = x | y;
}

/// The eight neighbours of a cell, in the order Redis searches them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Neighbors {
    pub north: Hash,
    pub south: Hash,
    pub east: Hash,
    pub west: Hash,
    pub north_east: Hash,
    pub north_west: Hash,
    pub south_east: Hash,
    pub south_west: Hash,
}

fn moved(h: Hash, dx: i8, dy: i8) -> Hash {
    let mut n = h;
    move_x(&mut n, dx);
    move_y(&mut n, dy);
    n
}

/// Redis's `geohashNeighbors` (wrapping around at the edges of the ranges).
pub fn neighbors(h: Hash) -> Neighbors {
    Neighbors {
        east: moved(h, 1, 0),
        west: moved(h, -1, 0),
        south: moved(h, 0, -1),
        north: moved(h, 0, 1),
        north_west: moved(h, -1, 1),
        north_east: moved(h, 1, 1),
        south_east: moved(h, 1, -1),
        south_west: moved(h, -1, -1),
    }
}

/// Redis's `geohashEstimateStepsByRadius`.
pub fn steps_by_radius(range_m: f64, lat: f64) -> u8 {
    if range_m == 0.0 {
        return 26;
    }
    let mut range = range_m;
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// Redis's `geohashGetLatDistance`.
pub fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// Redis's `geohashGetDistance` (haversine), in meters.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lon1r = deg_rad(lon1);
    let lon2r = deg_rad(lon2);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let lat1r = deg_rad(lat1);
    let lat2r = deg_rad(lat2);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

/// What a search covers, in meters once multiplied by `conversion`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    Radius(f64),
    /// Width and height.
    Box(f64, f64),
}

/// A search: its centre `(lon, lat)`, its shape in the unit and the unit's meters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Search {
    pub lon: f64,
    pub lat: f64,
    pub shape: Shape,
    pub conversion: f64,
}

impl Search {
    /// Redis's `geohashBoundingBox`: `[min_lon, min_lat, max_lon, max_lat]`.
    pub fn bounding_box(&self) -> [f64; 4] {
        let (h, w) = match self.shape {
            Shape::Radius(r) => (self.conversion * r, self.conversion * r),
            Shape::Box(w, h) => (self.conversion * (h / 2.0), self.conversion * (w / 2.0)),
        };
        let lat_delta = rad_deg(h / EARTH_RADIUS_M);
        let long_delta_top = rad_deg(w / EARTH_RADIUS_M / deg_rad(self.lat + lat_delta).cos());
        let long_delta_bottom = rad_deg(w / EARTH_RADIUS_M / deg_rad(self.lat - lat_delta).cos());
        let delta = if self.lat < 0.0 {
            long_delta_bottom
        } else {
            long_delta_top
        };
        [
            self.lon - delta,
            self.lat - lat_delta,
            self.lon + delta,
            self.lat + lat_delta,
        ]
    }

    /// The distance of a point from the centre if it is inside the shape (Redis's
    /// `geoWithinShape`).
    pub fn within(&self, lon: f64, lat: f64) -> Option<f64> {
        match self.shape {
            Shape::Radius(r) => {
                let d = distance(self.lon, self.lat, lon, lat);
                (d <= r * self.conversion).then_some(d)
            }
            Shape::Box(w, h) => {
                let (width_m, height_m) = (w * self.conversion, h * self.conversion);
                if lat_distance(lat, self.lat) > height_m / 2.0 {
                    return None;
                }
                if distance(lon, lat, self.lon, lat) > width_m / 2.0 {
                    return None;
                }
                Some(distance(self.lon, self.lat, lon, lat))
            }
        }
    }

    /// Redis's `geohashCalculateAreasByShapeWGS84`: the cells to read, in Redis's order
    /// (centre, N, S, E, W, NE, NW, SE, SW), excluded neighbours zeroed.
    pub fn cells(&self) -> [Hash; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounding_box();
        let radius_m = match self.shape {
            Shape::Radius(r) => r,
            Shape::Box(w, h) => ((w / 2.0) * (w / 2.0) + (h / 2.0) * (h / 2.0)).sqrt(),
        } * self.conversion;
        let mut steps = steps_by_radius(radius_m, self.lat);
        // The centre is inside the ranges (checked when it was parsed or decoded).
        let plan = |steps: u8| {
            let h = encode_wgs84(self.lon, self.lat, steps).unwrap_or_default();
            (h, neighbors(h), decode(h))
        };
        let (mut hash, mut n, mut area) = plan(steps);
        let too_big = decode(n.north).latitude.max < max_lat
            || decode(n.south).latitude.min > min_lat
            || decode(n.east).longitude.max < max_lon
            || decode(n.west).longitude.min > min_lon;
        if steps > 1 && too_big {
            steps -= 1;
            (hash, n, area) = plan(steps);
        }
        if steps >= 2 {
            let zero = Hash::default();
            if area.latitude.min < min_lat {
                (n.south, n.south_west, n.south_east) = (zero, zero, zero);
            }
            if area.latitude.max > max_lat {
                (n.north, n.north_east, n.north_west) = (zero, zero, zero);
            }
            if area.longitude.min < min_lon {
                (n.west, n.south_west, n.north_west) = (zero, zero, zero);
            }
            if area.longitude.max > max_lon {
                (n.east, n.south_east, n.north_east) = (zero, zero, zero);
            }
        }
        [
            hash,
            n.north,
            n.south,
            n.east,
            n.west,
            n.north_east,
            n.north_west,
            n.south_east,
            n.south_west,
        ]
    }
}

/// A coordinate as Redis's `addReplyHumanLongDouble` prints it: `%.17Lf` of the double
/// (exact in a long double), trailing zeros and point removed, "-0" as "0".
pub fn human(d: f64) -> String {
    let mut s = format!("{d:.17}");
    if s.contains('.') {
        let t = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(t);
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

/// A distance as Redis replies it: four decimals (`%.4f`).
pub fn distance_text(d: f64) -> String {
    format!("{d:.4}")
}

#[cfg(test)]
#[path = "geo_tests.rs"]
mod tests;
