//! Geo commands (Redis's geo.c) over sorted sets whose scores are 52-bit geohashes
//! (`crate::geo`): GEOADD, GEODIST, GEOHASH, GEOPOS, GEOSEARCH, GEOSEARCHSTORE, GEORADIUS,
//! GEORADIUS_RO, GEORADIUSBYMEMBER, GEORADIUSBYMEMBER_RO.
//!
//! A search reads the score ranges of the centre's cell and its neighbours in Redis's order,
//! keeps the points inside the shape, and sorts them by distance as Redis does (a stable
//! sort: points at the same distance keep the order they were found in). Every command
//! holds its keys' stripes from the read to the write.
//!
//! Layer: commands (above services; below execution).

use super::args::{ERR_NOT_FLOAT, ERR_NOT_INT, ERR_SYNTAX};
use super::zsets::{self, loc, lookup};
use super::{cmd, Args, CmdError, CmdResult, Ctx, Entry};
use crate::geo::{self, Search, Shape};
use crate::protocol::parse::parse_i64;
use crate::store::Meta;
use crate::zset::{self, parse_double, ScoreRange};
use bytes::Bytes;
use std::cmp::Ordering;

pub static COMMANDS: &[Entry] = &[
    cmd("geoadd", geoadd),
    cmd("geodist", geodist),
    cmd("geohash", geohash),
    cmd("geopos", geopos),
    cmd("geosearch", geosearch),
    cmd("geosearchstore", geosearchstore),
    cmd("georadius", georadius),
    cmd("georadius_ro", georadius_ro),
    cmd("georadiusbymember", georadiusbymember),
    cmd("georadiusbymember_ro", georadiusbymember_ro),
];

const ERR_MEMBER: &str = "ERR could not decode requested zset member";

fn is(a: &[u8], kw: &str) -> bool {
    a.eq_ignore_ascii_case(kw.as_bytes())
}

fn double(a: &[u8], err: &str) -> Result<f64, CmdError> {
    parse_double(a).ok_or_else(|| CmdError::reply(err))
}

/// Redis's `extractLongLatOrReply`.
fn lon_lat(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), CmdError> {
    let x = double(lon, ERR_NOT_FLOAT)?;
    let y = double(lat, ERR_NOT_FLOAT)?;
    if !(geo::LONG_MIN..=geo::LONG_MAX).contains(&x) || !(geo::LAT_MIN..=geo::LAT_MAX).contains(&y)
    {
        return Err(CmdError::reply(format!(
            "ERR invalid longitude,latitude pair {x:.6},{y:.6}"
        )));
    }
    Ok((x, y))
}

/// Redis's `extractUnitOrReply`: meters per unit.
fn unit(a: &[u8]) -> Result<f64, CmdError> {
    Ok(match a.to_ascii_lowercase().as_slice() {
        b"m" => 1.0,
        b"km" => 1000.0,
        b"ft" => 0.3048,
        b"mi" => 1609.34,
        _ => {
            return Err(CmdError::reply(
                "ERR unsupported unit provided. please use M, KM, FT, MI",
            ))
        }
    })
}

/// Redis's `extractDistanceOrReply`: the radius and its unit's meters.
fn radius(r: &[u8], u: &[u8]) -> Result<(f64, f64), CmdError> {
    let d = double(r, "ERR need numeric radius")?;
    if d < 0.0 {
        return Err(CmdError::reply("ERR radius cannot be negative"));
    }
    Ok((d, unit(u)?))
}

/// Redis's `extractBoxOrReply`: width, height and the unit's meters.
fn boxed(w: &[u8], h: &[u8], u: &[u8]) -> Result<(f64, f64, f64), CmdError> {
    let w = double(w, "ERR need numeric width")?;
    let h = double(h, "ERR need numeric height")?;
    if h < 0.0 || w < 0.0 {
        return Err(CmdError::reply("ERR height or width cannot be negative"));
    }
    Ok((w, h, unit(u)?))
}

/// The position of `member` in the sorted set `m` of `key`.
fn member_position(
    ctx: &Ctx<'_>,
    key: &[u8],
    m: &Meta,
    member: &[u8],
) -> Result<Option<(f64, f64)>, CmdError> {
    let s = zset::score(ctx.tx, loc(ctx.conn.db, key, m), member)?;
    Ok(s.map(geo::position_of))
}

// ---- GEOADD, GEODIST, GEOHASH, GEOPOS ---------------------------------------------------

/// GEOADD key [NX|XX] [CH] lon lat member ...: ZADD with the positions' scores.
fn geoadd(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let rest = args.rest().to_vec();
    let (mut nx, mut xx) = (false, false);
    let mut opts = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        let a = &rest[i];
        if is(a, "nx") {
            nx = true;
        } else if is(a, "xx") {
            xx = true;
        } else if !is(a, "ch") {
            break;
        }
        opts.push(a.clone());
        i += 1;
    }
    if !(rest.len() - i).is_multiple_of(3) || (nx && xx) {
        return Err(CmdError::reply(ERR_SYNTAX));
    }
    let mut argv: Vec<Bytes> = vec![Bytes::from_static(b"zadd"), key];
    argv.extend(opts);
    for t in rest[i..].chunks(3) {
        let (x, y) = lon_lat(&t[0], &t[1])?;
        let score = geo::score_of(x, y).unwrap_or(0);
        argv.push(Bytes::from(score.to_string()));
        argv.push(t[2].clone());
    }
    zsets::zadd(ctx, &mut Args::new(argv, 1))
}

fn geodist(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let a = args.next_bytes()?;
    let b = args.next_bytes()?;
    let rest = args.rest();
    let to_m = match rest {
        [] => 1.0,
        [u] => unit(u)?,
        _ => return Err(CmdError::reply(ERR_SYNTAX)),
    };
    let db = ctx.conn.db;
    let Some(m) = lookup(ctx, &key, true)? else {
        ctx.reply.null();
        return Ok(());
    };
    let scores = zset::scores(ctx.tx, loc(db, &key, &m), &[&a, &b])?;
    match (scores[0], scores[1]) {
        (Some(s1), Some(s2)) => {
            let (x1, y1) = geo::position_of(s1);
            let (x2, y2) = geo::position_of(s2);
            let d = geo::distance(x1, y1, x2, y2) / to_m;
            ctx.reply.bulk(geo::distance_text(d).as_bytes());
        }
        _ => ctx.reply.null(),
    }
    Ok(())
}

/// The scores of `members` in `key` (all `None` when the key does not exist).
fn member_scores(
    ctx: &Ctx<'_>,
    key: &[u8],
    members: &[Bytes],
) -> Result<Vec<Option<f64>>, CmdError> {
    let db = ctx.conn.db;
    let ms: Vec<&[u8]> = members.iter().map(|m| &m[..]).collect();
    Ok(match lookup(ctx, key, true)? {
        Some(m) => zset::scores(ctx.tx, loc(db, key, &m), &ms)?,
        None => vec![None; ms.len()],
    })
}

fn geohash(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let members = args.rest().to_vec();
    let scores = member_scores(ctx, &key, &members)?;
    ctx.reply.array(scores.len());
    for s in scores {
        match s {
            Some(s) => {
                let (x, y) = geo::position_of(s);
                ctx.reply.bulk(&geo::hash_string(x, y));
            }
            None => ctx.reply.null(),
        }
    }
    Ok(())
}

fn geopos(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let members = args.rest().to_vec();
    let scores = member_scores(ctx, &key, &members)?;
    ctx.reply.array(scores.len());
    for s in scores {
        match s {
            Some(s) => {
                let (x, y) = geo::position_of(s);
                ctx.reply.array(2);
                ctx.reply.double_text(&geo::human(x));
                ctx.reply.double_text(&geo::human(y));
            }
            None => ctx.reply.null_array(),
        }
    }
    Ok(())
}

// ---- searches ---------------------------------------------------------------------------

/// Which command a search is (Redis's `georadiusGeneric` flags).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// GEORADIUS[_RO] key lon lat radius unit.
    Coords { store: bool },
    /// GEORADIUSBYMEMBER[_RO] key member radius unit.
    Member { store: bool },
    /// GEOSEARCH key (FROMMEMBER|FROMLONLAT) (BYRADIUS|BYBOX).
    Search,
    /// GEOSEARCHSTORE dst key ...
    SearchStore,
}

fn georadius(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    search_generic(ctx, args, Kind::Coords { store: true })
}

fn georadius_ro(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    search_generic(ctx, args, Kind::Coords { store: false })
}

fn georadiusbymember(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    search_generic(ctx, args, Kind::Member { store: true })
}

fn georadiusbymember_ro(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    search_generic(ctx, args, Kind::Member { store: false })
}

fn geosearch(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    search_generic(ctx, args, Kind::Search)
}

fn geosearchstore(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    search_generic(ctx, args, Kind::SearchStore)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// The options of a search, parsed.
struct Options {
    withdist: bool,
    withhash: bool,
    withcoord: bool,
    sort: Sort,
    any: bool,
    /// 0: no limit.
    count: u64,
    store: Option<Bytes>,
    storedist: bool,
    center: Option<(f64, f64)>,
    /// FROMMEMBER was given (its member may be unknown when the key does not exist).
    from_member: bool,
    from_lonlat: bool,
    shape: Option<(Shape, f64)>,
}

/// A point found: member, score, position, distance in meters.
struct Point {
    member: Vec<u8>,
    score: f64,
    lon: f64,
    lat: f64,
    dist: f64,
}

/// Redis's `georadiusGeneric`: the same order of checks, so the same error wins.
fn search_generic(ctx: &mut Ctx<'_>, args: &mut Args, kind: Kind) -> CmdResult {
    let argv: Vec<Bytes> = args.rest().to_vec();
    let (src_at, base) = match kind {
        Kind::Coords { .. } => (0, 5),
        Kind::Member { .. } => (0, 4),
        Kind::Search => (0, 1),
        Kind::SearchStore => (1, 2),
    };
    if argv.len() < base {
        return Err(CmdError::reply(ERR_SYNTAX));
    }
    let src = argv[src_at].clone();
    let db = ctx.conn.db;
    // The destination is known only after parsing: lock every argument that may name it
    // with the source (a superset of the keys; stripes are cheap).
    let mut keys: Vec<&[u8]> = vec![&src];
    match kind {
        Kind::SearchStore => keys.push(&argv[0]),
        Kind::Coords { store: true } | Kind::Member { store: true } => {
            keys.extend(argv[base..].windows(2).filter_map(|w| {
                (is(&w[0], "store") || is(&w[0], "storedist")).then_some(&w[1][..])
            }));
        }
        _ => {}
    }
    let zobj = lookup(ctx, &src, true)?;
    let mut o = Options {
        withdist: false,
        withhash: false,
        withcoord: false,
        sort: Sort::None,
        any: false,
        count: 0,
        store: (kind == Kind::SearchStore).then(|| argv[0].clone()),
        storedist: false,
        center: None,
        from_member: false,
        from_lonlat: false,
        shape: None,
    };
    match kind {
        Kind::Coords { .. } => {
            o.center = Some(lon_lat(&argv[1], &argv[2])?);
            let (r, c) = radius(&argv[3], &argv[4])?;
            o.shape = Some((Shape::Radius(r), c));
        }
        Kind::Member { .. } => {
            if let Some(m) = &zobj {
                o.center = member_position(ctx, &src, m, &argv[1])?;
                if o.center.is_none() {
                    return Err(CmdError::reply(ERR_MEMBER));
                }
                let (r, c) = radius(&argv[2], &argv[3])?;
                o.shape = Some((Shape::Radius(r), c));
            }
        }
        Kind::Search | Kind::SearchStore => {}
    }
    parse_options(ctx, &argv[base..], kind, &src, zobj.as_ref(), &mut o)?;
    if o.store.is_some() && (o.withdist || o.withhash || o.withcoord) {
        return Err(CmdError::reply(if kind == Kind::SearchStore {
            "ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        } else {
            "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        }));
    }
    let name = String::from_utf8_lossy(args.sent(0).map_or(&b""[..], |b| &b[..])).into_owned();
    if matches!(kind, Kind::Search | Kind::SearchStore) {
        if !(o.from_member || o.from_lonlat) {
            return Err(CmdError::reply(format!(
                "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
            )));
        }
        if o.shape.is_none() {
            return Err(CmdError::reply(format!(
                "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
            )));
        }
    }
    if o.any && o.count == 0 {
        return Err(CmdError::reply(
            "ERR the ANY argument requires COUNT argument",
        ));
    }
    let Some(m) = zobj else {
        match &o.store {
            Some(dst) => {
                if ctx.tx.get(db, dst)?.is_some() {
                    ctx.tx.delete(db, dst)?;
                }
                ctx.reply.int(0);
            }
            None => ctx.reply.array(0),
        }
        return Ok(());
    };
    if o.count != 0 && o.sort == Sort::None && !o.any {
        o.sort = Sort::Asc;
    }
    let (Some((lon, lat)), Some((shape, conversion))) = (o.center, o.shape) else {
        return Err(CmdError::reply(ERR_SYNTAX));
    };
    let search = Search {
        lon,
        lat,
        shape,
        conversion,
    };
    let limit = if o.any { o.count } else { 0 };
    let mut points = find_points(ctx, &src, &m, &search, limit)?;
    let returned = if o.count == 0 {
        points.len()
    } else {
        points.len().min(o.count.min(usize::MAX as u64) as usize)
    };
    if o.sort != Sort::None {
        let desc = o.sort == Sort::Desc;
        let cmp = |a: &Point, b: &Point| {
            let c = a.dist.partial_cmp(&b.dist).unwrap_or(Ordering::Equal);
            if desc {
                c.reverse()
            } else {
                c
            }
        };
        // Redis: qsort (glibc's is a stable merge sort) when every point is returned, its
        // partial quicksort when COUNT cuts them (ties land differently).
        if returned == points.len() {
            points.sort_by(cmp);
        } else if returned > 0 {
            crate::pqsort::pqsort(&mut points, &cmp, 0, returned - 1);
        }
    }
    points.truncate(returned);
    match &o.store {
        None => reply_points(ctx, &points, &o, conversion),
        Some(dst) => {
            let mut entries: Vec<zset::Entry> = points
                .into_iter()
                .map(|p| {
                    let s = if o.storedist {
                        p.dist / conversion
                    } else {
                        p.score
                    };
                    (p.member, s)
                })
                .collect();
            entries.sort_by(zset::cmp_entries);
            // Redis's georadiusGeneric names the event after the command family.
            let event = if matches!(kind, Kind::SearchStore) {
                "geosearchstore"
            } else {
                "georadiusstore"
            };
            zsets::store_result(ctx, dst, &entries, event)
        }
    }
}

/// The optional arguments of a search (Redis's loop in `georadiusGeneric`).
fn parse_options(
    ctx: &Ctx<'_>,
    a: &[Bytes],
    kind: Kind,
    src: &[u8],
    zobj: Option<&Meta>,
    o: &mut Options,
) -> CmdResult {
    let search = matches!(kind, Kind::Search | Kind::SearchStore);
    let may_store = matches!(
        kind,
        Kind::Coords { store: true } | Kind::Member { store: true }
    );
    let mut i = 0;
    while i < a.len() {
        let left = a.len() - i - 1;
        let arg = &a[i];
        if is(arg, "withdist") {
            o.withdist = true;
        } else if is(arg, "withhash") {
            o.withhash = true;
        } else if is(arg, "withcoord") {
            o.withcoord = true;
        } else if is(arg, "any") {
            o.any = true;
        } else if is(arg, "asc") {
            o.sort = Sort::Asc;
        } else if is(arg, "desc") {
            o.sort = Sort::Desc;
        } else if is(arg, "count") && left >= 1 {
            let n = parse_i64(&a[i + 1]).ok_or_else(|| CmdError::reply(ERR_NOT_INT))?;
            if n <= 0 {
                return Err(CmdError::reply("ERR COUNT must be > 0"));
            }
            o.count = n as u64;
            i += 1;
        } else if may_store && (is(arg, "store") || is(arg, "storedist")) && left >= 1 {
            o.store = Some(a[i + 1].clone());
            o.storedist = is(arg, "storedist");
            i += 1;
        } else if kind == Kind::SearchStore && is(arg, "storedist") {
            o.storedist = true;
        } else if search && is(arg, "frommember") && left >= 1 && !o.from_lonlat {
            if let Some(m) = zobj {
                o.center = member_position(ctx, src, m, &a[i + 1])?;
                if o.center.is_none() {
                    return Err(CmdError::reply(ERR_MEMBER));
                }
            }
            o.from_member = true;
            i += 1;
        } else if search && is(arg, "fromlonlat") && left >= 2 && !o.from_member {
            o.center = Some(lon_lat(&a[i + 1], &a[i + 2])?);
            o.from_lonlat = true;
            i += 2;
        } else if search
            && is(arg, "byradius")
            && left >= 2
            && !matches!(o.shape, Some((Shape::Box(..), _)))
        {
            let (r, c) = radius(&a[i + 1], &a[i + 2])?;
            o.shape = Some((Shape::Radius(r), c));
            i += 2;
        } else if search
            && is(arg, "bybox")
            && left >= 3
            && !matches!(o.shape, Some((Shape::Radius(_), _)))
        {
            let (w, h, c) = boxed(&a[i + 1], &a[i + 2], &a[i + 3])?;
            o.shape = Some((Shape::Box(w, h), c));
            i += 3;
        } else {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
        i += 1;
    }
    Ok(())
}

/// Redis's `membersOfAllNeighbors`: the points of each cell in the shape, cells in
/// Redis's order (a cell equal to the one read just before is skipped), each in score
/// order; stops once `limit` (ANY) points were found.
fn find_points(
    ctx: &Ctx<'_>,
    key: &[u8],
    m: &Meta,
    s: &Search,
    limit: u64,
) -> Result<Vec<Point>, CmdError> {
    let z = loc(ctx.conn.db, key, m);
    let cells = s.cells();
    let mut out: Vec<Point> = Vec::new();
    let mut last: Option<usize> = None;
    for (i, cell) in cells.iter().enumerate() {
        if cell.is_zero() {
            continue;
        }
        if let Some(l) = last {
            if l != 0 && cells[l] == *cell {
                continue;
            }
        }
        if limit != 0 && !out.is_empty() && out.len() as u64 >= limit {
            break;
        }
        let (min, max) = cell.score_range();
        let range = ScoreRange {
            min: min as f64,
            minex: false,
            max: max as f64,
            maxex: true,
        };
        for (member, score) in zset::by_score(ctx.tx, z, &range, false, 0, u64::MAX)? {
            let (lon, lat) = geo::position_of(score);
            if let Some(dist) = s.within(lon, lat) {
                out.push(Point {
                    member,
                    score,
                    lon,
                    lat,
                    dist,
                });
            }
            if limit != 0 && !out.is_empty() && out.len() as u64 >= limit {
                break;
            }
        }
        last = Some(i);
    }
    Ok(out)
}

fn reply_points(ctx: &mut Ctx<'_>, points: &[Point], o: &Options, conversion: f64) -> CmdResult {
    let extra = usize::from(o.withdist) + usize::from(o.withhash) + usize::from(o.withcoord);
    ctx.reply.array(points.len());
    for p in points {
        if extra > 0 {
            ctx.reply.array(extra + 1);
        }
        ctx.reply.bulk(&p.member);
        if o.withdist {
            ctx.reply
                .bulk(geo::distance_text(p.dist / conversion).as_bytes());
        }
        if o.withhash {
            ctx.reply.int(p.score as i64);
        }
        if o.withcoord {
            ctx.reply.array(2);
            ctx.reply.double_text(&geo::human(p.lon));
            ctx.reply.double_text(&geo::human(p.lat));
        }
    }
    Ok(())
}
