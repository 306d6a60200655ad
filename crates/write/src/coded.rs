//! Text columns written from codes. A row's value is given as a number (who read, the surface, an
//! interned text's index) with the function that names a number's text; the column is written as
//! Parquet's dictionary encoding straight from the numbers: each distinct text is looked up once,
//! and no row's text is copied, hashed or compared (arrow-rs' writer does all three a row, the
//! most of writing the stream's `events`; docs/benchmarks.md). The file around them is arrow-rs'
//! (its schema, footer and other columns), so every reader reads the same file as before.

use bytes::Bytes;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::column::page::{CompressedPage, Page, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::data_type::ByteArray;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ColumnChunkMetaData, ColumnIndexBuilder};
use parquet::file::page_index::column_index::ColumnIndexMetaData;
use parquet::file::page_index::offset_index::{OffsetIndexMetaData, PageLocation};
use parquet::file::properties::EnabledStatistics;
use parquet::file::statistics::Statistics;
use parquet::file::writer::{SerializedPageWriter, TrackedWrite};
use parquet::schema::types::{ColumnDescPtr, ColumnPath};
use std::collections::HashMap;

/// A row without a value.
pub const NONE: u32 = u32::MAX;

/// The text of a code (`None`: the code names nothing, an error of the caller's).
pub type Namer<'a> = Box<dyn Fn(u32) -> Option<&'a str> + 'a>;

/// A column's values as codes and the function that names them.
pub struct Coded<'a> {
    /// Each row's code ([`NONE`]: no value).
    pub codes: Vec<u32>,
    /// A code's text.
    pub name: Namer<'a>,
}

/// The dictionary of a column's codes: each distinct text once, in order of first use, and each
/// row's place in it (rows without a value left out).
struct Dictionary<'t> {
    texts: Vec<&'t str>,
    keys: Vec<u32>,
    nulls: u64,
}

/// Codes below this are kept in a table by their value; the rest, in a hash map.
const DENSE: u32 = 1 << 20;

fn dictionary<'t>(codes: &[u32], name: &Namer<'t>) -> Result<Dictionary<'t>, ParquetError> {
    let mut dense: Vec<u32> = Vec::new();
    // The hashes are of codes and texts docpipe holds (foldhash: a quarter of SipHash's cost).
    let mut sparse: HashMap<u32, u32, foldhash::fast::RandomState> = HashMap::default();
    let mut of_text: HashMap<&'t str, u32, foldhash::fast::RandomState> = HashMap::default();
    let mut d = Dictionary {
        texts: Vec::new(),
        keys: Vec::with_capacity(codes.len()),
        nulls: 0,
    };
    for &code in codes {
        if code == NONE {
            d.nulls += 1;
            continue;
        }
        let known = if code < DENSE {
            dense.get(code as usize).copied().filter(|&k| k != NONE)
        } else {
            sparse.get(&code).copied()
        };
        let key = match known {
            Some(k) => k,
            None => {
                let text = name(code)
                    .ok_or_else(|| ParquetError::General(format!("no text for the code {code}")))?;
                let k = *of_text.entry(text).or_insert_with(|| {
                    d.texts.push(text);
                    (d.texts.len() - 1) as u32
                });
                if code < DENSE {
                    if dense.len() <= code as usize {
                        dense.resize(code as usize + 1, NONE);
                    }
                    dense[code as usize] = k;
                } else {
                    sparse.insert(code, k);
                }
                k
            }
        };
        d.keys.push(key);
    }
    Ok(d)
}

/// The bits a value below `n` takes (0 for at most one value).
fn width(n: usize) -> u8 {
    (usize::BITS - n.saturating_sub(1).leading_zeros()) as u8
}

fn uleb(mut v: usize, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// `values` as one bit-packed run (padded with zeros to a multiple of eight values).
fn packed(values: &[u32], width: u8, out: &mut Vec<u8>) {
    if values.is_empty() {
        return;
    }
    let groups = values.len().div_ceil(8);
    uleb(groups << 1 | 1, out);
    // Eight values of `width` bits are `width` bytes: made in one number and written at once
    // (the keys of a dictionary of up to 65,536 texts; a byte at a time, below, for wider).
    let w = usize::from(width);
    if w <= 16 {
        let (whole, rest) = values.as_chunks::<8>();
        let mut last = [0u32; 8];
        last[..rest.len()].copy_from_slice(rest);
        let tail = (!rest.is_empty()).then_some(&last);
        for group in whole.iter().chain(tail) {
            let acc = (0..8).fold(0u128, |acc, j| acc | u128::from(group[j]) << (j * w));
            out.extend_from_slice(&acc.to_le_bytes()[..w]);
        }
        return;
    }
    let (mut acc, mut bits) = (0u64, 0u32);
    for i in 0..groups * 8 {
        acc |= u64::from(values.get(i).copied().unwrap_or(0)) << bits;
        bits += u32::from(width);
        while bits >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            bits -= 8;
        }
    }
}

/// `values` in Parquet's RLE / bit-packing hybrid of `width` bits: a run of eight or more of one
/// value as a repeated run, the rest bit-packed eight at a time.
pub(crate) fn hybrid(values: &[u32], width: u8, out: &mut Vec<u8>) {
    let bytes = usize::from(width).div_ceil(8);
    let (mut i, mut pending) = (0, 0);
    while i < values.len() {
        let v = values[i];
        // A value unlike the next starts no run: passed with one compare (most values of a
        // column in time order; counting each one's run took twice the instructions).
        if values.get(i + 1).is_some_and(|&next| next != v) {
            i += 1;
            continue;
        }
        let run = values[i..].iter().take_while(|&&x| x == v).count();
        // The values waiting to be packed must make whole groups before a repeated run.
        let fill = (8 - (i - pending) % 8) % 8;
        if run >= fill + 8 {
            packed(&values[pending..i + fill], width, out);
            let rest = run - fill;
            uleb(rest << 1, out);
            out.extend_from_slice(&v.to_le_bytes()[..bytes]);
            i += run;
            pending = i;
        } else {
            i += run;
        }
    }
    packed(&values[pending..], width, out);
}

/// Each text's rank among `texts`, and the texts in order.
fn ranks<'t>(texts: &[&'t str]) -> (Vec<u32>, Vec<&'t str>) {
    let mut order: Vec<u32> = (0..texts.len() as u32).collect();
    order.sort_unstable_by_key(|&k| texts[k as usize]);
    let mut rank = vec![0; order.len()];
    for (r, &k) in order.iter().enumerate() {
        rank[k as usize] = r as u32;
    }
    (rank, order.iter().map(|&k| texts[k as usize]).collect())
}

/// Writes one page, compressed, and returns where it went.
fn page(
    writer: &mut SerializedPageWriter<'_, Vec<u8>>,
    zstd: &mut zstd::bulk::Compressor<'_>,
    body: &[u8],
    make: impl FnOnce(Bytes) -> Page,
) -> Result<parquet::column::page::PageWriteSpec, ParquetError> {
    let compressed = zstd
        .compress(body)
        .map_err(|e| ParquetError::External(e.into()))?;
    writer.write_page(CompressedPage::new(
        make(Bytes::from(compressed)),
        body.len(),
    ))
}

/// Longest min or max a page index keeps (arrow-rs' default truncation length: a column with a
/// longer text gets no page index, rather than a truncated one).
const INDEX_TEXT: usize = 64;

/// The data pages written: where they are, and each page's least and greatest text (as the
/// texts' ranks) and rows without a value.
#[derive(Default)]
struct Pages {
    compressed: usize,
    uncompressed: usize,
    first: Option<u64>,
    locations: Vec<PageLocation>,
    bounds: Vec<(Option<(u32, u32)>, i64)>,
}

fn data_pages(
    writer: &mut SerializedPageWriter<'_, Vec<u8>>,
    zstd: &mut zstd::bulk::Compressor<'_>,
    d: &Dictionary<'_>,
    codes: &[u32],
    nullable: bool,
    page_rows: usize,
    rank: &[u32],
) -> Result<Pages, ParquetError> {
    let bits = width(d.texts.len());
    let (mut out, mut key_at, mut body, mut levels) = (Pages::default(), 0, vec![], vec![]);
    for (n, rows) in codes.chunks(page_rows).enumerate() {
        body.clear();
        let values = if nullable {
            levels.clear();
            levels.extend(rows.iter().map(|&c| u32::from(c != NONE)));
            let mut encoded = Vec::new();
            hybrid(&levels, 1, &mut encoded);
            body.extend_from_slice(&(encoded.len() as u32).to_le_bytes());
            body.extend_from_slice(&encoded);
            rows.iter().filter(|&&c| c != NONE).count()
        } else {
            rows.len()
        };
        let keys = &d.keys[key_at..key_at + values];
        key_at += values;
        body.push(bits);
        hybrid(keys, bits, &mut body);
        let spec = page(writer, zstd, &body, |buf| Page::DataPage {
            buf,
            num_values: rows.len() as u32,
            encoding: Encoding::RLE_DICTIONARY,
            def_level_encoding: Encoding::RLE,
            rep_level_encoding: Encoding::RLE,
            statistics: None,
        })?;
        out.first.get_or_insert(spec.offset);
        out.compressed += spec.compressed_size;
        out.uncompressed += spec.uncompressed_size;
        out.locations.push(PageLocation {
            offset: spec.offset as i64,
            compressed_page_size: spec.compressed_size as i32,
            first_row_index: (n * page_rows) as i64,
        });
        // Without ranks (no statistics) no page has bounds.
        let bounds = match rank.is_empty() {
            true => None,
            false => keys.iter().fold(None, |b: Option<(u32, u32)>, &k| {
                let r = rank[k as usize];
                Some(b.map_or((r, r), |(lo, hi)| (lo.min(r), hi.max(r))))
            }),
        };
        out.bounds.push((bounds, (rows.len() - values) as i64));
    }
    Ok(out)
}

/// The page index of a column's texts (`None` when a text is too long for one).
fn page_index(
    descr: &ColumnDescPtr,
    sorted: &[&str],
    pages: &Pages,
) -> Result<Option<ColumnIndexMetaData>, ParquetError> {
    if sorted.iter().any(|t| t.len() > INDEX_TEXT) {
        return Ok(None);
    }
    let mut index = ColumnIndexBuilder::new(descr.physical_type());
    for &(bounds, nulls) in &pages.bounds {
        match bounds {
            Some((lo, hi)) => index.append(
                false,
                sorted[lo as usize].as_bytes().to_vec(),
                sorted[hi as usize].as_bytes().to_vec(),
                nulls,
                None,
            ),
            None => index.append(true, vec![], vec![], nulls, None),
        }
    }
    index.build().map(Some)
}

/// A column chunk of `coded` for the column `descr`, `page_rows` rows a data page, compressed
/// by zstd at `level`, with statistics as `stats` asks: its bytes and what the row group needs
/// to splice them in. `None` when no row has a value (the caller writes the nulls its own way).
pub(crate) fn chunk(
    descr: ColumnDescPtr,
    coded: &Coded<'_>,
    page_rows: usize,
    (level, stats): (ZstdLevel, EnabledStatistics),
    zstd: &mut zstd::bulk::Compressor<'_>,
) -> Result<Option<(Bytes, ColumnCloseResult)>, ParquetError> {
    let d = dictionary(&coded.codes, &coded.name)?;
    let nullable = descr.max_def_level() > 0;
    if !nullable && d.nulls > 0 {
        return Err(ParquetError::General(format!(
            "{} rows without a value in the required column {}",
            d.nulls,
            descr.name()
        )));
    }
    if d.texts.is_empty() {
        return Ok(None);
    }
    // Each text's rank among the texts, for the least and greatest of a page; without
    // statistics none is kept, and the texts are not sorted (a column of many texts, as a
    // day's sessions, spent more on the sort than on the rest).
    let (rank, sorted) = match stats {
        EnabledStatistics::None => (Vec::new(), Vec::new()),
        _ => ranks(&d.texts),
    };
    let mut sink = TrackedWrite::new(Vec::new());
    let mut writer = SerializedPageWriter::new(&mut sink);
    let mut body = Vec::new();
    for t in &d.texts {
        body.extend_from_slice(&(t.len() as u32).to_le_bytes());
        body.extend_from_slice(t.as_bytes());
    }
    let num_values = d.texts.len() as u32;
    let dict = page(&mut writer, zstd, &body, |buf| Page::DictionaryPage {
        buf,
        num_values,
        encoding: Encoding::PLAIN,
        is_sorted: false,
    })?;
    let pages = data_pages(
        &mut writer,
        zstd,
        &d,
        &coded.codes,
        nullable,
        page_rows.max(1),
        &rank,
    )?;
    let bytes = Bytes::from(sink.into_inner()?);
    let compressed = dict.compressed_size + pages.compressed;
    let text_bytes: i64 = d
        .keys
        .iter()
        .map(|&k| d.texts[k as usize].len() as i64)
        .sum();
    let rows = coded.codes.len();
    let mut metadata = ColumnChunkMetaData::builder(descr.clone())
        .set_compression(Compression::ZSTD(level))
        .set_encodings(vec![
            Encoding::PLAIN,
            Encoding::RLE,
            Encoding::RLE_DICTIONARY,
        ])
        .set_num_values(rows as i64)
        .set_total_compressed_size(compressed as i64)
        .set_total_uncompressed_size((dict.uncompressed_size + pages.uncompressed) as i64)
        .set_dictionary_page_offset(Some(dict.offset as i64))
        .set_data_page_offset(pages.first.unwrap_or(dict.offset) as i64)
        .set_unencoded_byte_array_data_bytes(Some(text_bytes));
    if stats != EnabledStatistics::None {
        let (min, max) = (sorted[0], sorted[sorted.len() - 1]);
        metadata = metadata.set_statistics(Statistics::new(
            Some(ByteArray::from(min)),
            Some(ByteArray::from(max)),
            None,
            Some(d.nulls),
            false,
        ));
    }
    let column_index = match stats {
        EnabledStatistics::Page => page_index(&descr, &sorted, &pages)?,
        _ => None,
    };
    let close = ColumnCloseResult {
        bytes_written: compressed as u64,
        rows_written: rows as u64,
        metadata: metadata.build()?,
        bloom_filter: None,
        column_index,
        offset_index: Some(OffsetIndexMetaData {
            page_locations: pages.locations,
            unencoded_byte_array_data_bytes: None,
        }),
    };
    Ok(Some((bytes, close)))
}

/// A column of a chunk of rows: an Arrow array, or codes.
pub enum Col<'a> {
    /// Values as an Arrow array (written by arrow-rs).
    Array(arrow_array::ArrayRef),
    /// Text values as codes (written by [`chunk`]).
    Coded(Coded<'a>),
}

/// `props` for arrow-rs' writers of the columns: it makes one for every column, and one of a
/// coded column (written here) gets no codec, whose making (zstd's contexts, for each such
/// column of each file) took 73 of 1,900 `perf` samples of writing a day; it writes only a
/// column of nulls, uncompressed.
fn uncoded(
    props: &parquet::file::properties::WriterProperties,
    schema: &arrow_schema::SchemaRef,
    first: Option<&Result<Vec<Col<'_>>, String>>,
) -> parquet::file::properties::WriterProperties {
    let Some(Ok(cols)) = first else {
        return props.clone();
    };
    let coded = cols
        .iter()
        .zip(schema.fields())
        .filter(|(c, _)| matches!(c, Col::Coded(_)));
    coded
        .fold(props.clone().into_builder(), |b, (_, field)| {
            b.set_column_compression(
                ColumnPath::from(field.name().as_str()),
                Compression::UNCOMPRESSED,
            )
        })
        .build()
}

/// Writes `chunks` (each a list of `schema`'s columns over the same rows) as one row group of
/// the file `file`, its coded columns from their codes and the rest by arrow-rs; returns the
/// file once its footer is written.
pub(crate) fn write_columns<'a, W: std::io::Write + Send>(
    file: W,
    schema: arrow_schema::SchemaRef,
    props: parquet::file::properties::WriterProperties,
    level: ZstdLevel,
    chunks: impl IntoIterator<Item = Result<Vec<Col<'a>>, String>>,
) -> Result<W, ParquetError> {
    use parquet::arrow::ArrowWriter;
    use parquet::arrow::arrow_writer::compute_leaves;
    let page_rows = props.data_page_row_count_limit();
    let mut chunks = chunks.into_iter().peekable();
    let writer = ArrowWriter::try_new(
        file,
        schema.clone(),
        Some(uncoded(&props, &schema, chunks.peek())),
    )?;
    let (mut file, factory) = writer.into_serialized_writer()?;
    let mut writers = factory.create_column_writers(0)?;
    let mut coded: Vec<Option<Coded<'a>>> = schema.fields().iter().map(|_| None).collect();
    let mut rows = 0;
    // How many chunks come (at least): a coded column's codes are held for the whole row
    // group, and get that room at once (growing by doubling copied them several times).
    let more = chunks.size_hint().0.saturating_sub(1);
    for cols in chunks {
        let cols = cols.map_err(ParquetError::General)?;
        if cols.len() != writers.len() {
            return Err(ParquetError::General(format!(
                "{} columns where the schema has {}",
                cols.len(),
                writers.len()
            )));
        }
        let mut chunk_rows = None;
        for (i, col) in cols.into_iter().enumerate() {
            let n = match col {
                Col::Array(array) => {
                    let n = array.len();
                    for leaf in compute_leaves(schema.field(i), &array)? {
                        writers[i].write(&leaf)?;
                    }
                    n
                }
                Col::Coded(c) => {
                    let n = c.codes.len();
                    match &mut coded[i] {
                        Some(all) => {
                            all.codes.extend_from_slice(&c.codes);
                            all.name = c.name;
                        }
                        slot => {
                            let mut c = c;
                            c.codes.reserve(c.codes.len() * more);
                            *slot = Some(c);
                        }
                    }
                    n
                }
            };
            if *chunk_rows.get_or_insert(n) != n {
                return Err(ParquetError::General(format!(
                    "column {} has {n} rows where the others have {}",
                    schema.field(i).name(),
                    chunk_rows.unwrap_or_default()
                )));
            }
        }
        rows += chunk_rows.unwrap_or_default();
    }
    let mut zstd = zstd::bulk::Compressor::new(level.compression_level())
        .map_err(|e| ParquetError::External(e.into()))?;
    let descrs: Vec<ColumnDescPtr> = (0..writers.len())
        .map(|i| file.schema_descr().column(i))
        .collect();
    let mut group = file.next_row_group()?;
    for (i, ((mut w, codes), descr)) in writers.into_iter().zip(coded).zip(descrs).enumerate() {
        let written = match &codes {
            Some(c) => {
                let stats = props.statistics_enabled(descr.path());
                chunk(descr, c, page_rows, (level, stats), &mut zstd)?
            }
            None => None,
        };
        match written {
            Some((bytes, close)) => group.append_column(&bytes, close)?,
            None => {
                if codes.is_some() {
                    // No row has a value: the nulls as arrow-rs writes them.
                    let field = schema.field(i);
                    let nulls = arrow_array::new_null_array(field.data_type(), rows);
                    for leaf in compute_leaves(field, &nulls)? {
                        w.write(&leaf)?;
                    }
                }
                w.close()?.append_to_row_group(&mut group)?;
            }
        }
    }
    group.close()?;
    file.into_inner()
}

#[cfg(test)]
mod tests {
    use super::NONE;
    use crate::derived::Columns;
    use arrow_array::{Array, Int64Array, StringArray};
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::file::statistics::Statistics;

    /// Row `i`'s codes: `a` in runs of 1 to 19 over 300 codes (codes 7 and 8 named alike),
    /// `b` one text or none (long runs of none), `c` always none.
    fn codes(i: u32) -> (u32, u32, u32) {
        let run = i / 10 + (i % 7);
        let a = (run * 37 + run / 19) % 300;
        let b = if (i / 700) % 3 == 1 || i.is_multiple_of(3) {
            NONE
        } else {
            4
        };
        (a, b, NONE)
    }

    fn name<'a>(code: u32) -> Option<&'a str> {
        static TEXTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
        let texts = TEXTS.get_or_init(|| {
            (0..300)
                .map(|c| match c {
                    7 | 8 => "same".to_string(),
                    c => format!("t{c:03}"),
                })
                .collect()
        });
        texts.get(code as usize).map(String::as_str)
    }

    fn chunk_stats(path: &std::path::Path) -> Vec<String> {
        let r = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
        let g = r.metadata().row_group(0);
        (0..g.num_columns())
            .map(|c| match g.column(c).statistics() {
                Some(Statistics::ByteArray(s)) => format!(
                    "{:?} {:?} {:?}",
                    s.min_opt().map(|v| v.as_utf8().unwrap().to_string()),
                    s.max_opt().map(|v| v.as_utf8().unwrap().to_string()),
                    s.null_count_opt()
                ),
                other => format!("{:?}", other.and_then(|s| s.null_count_opt())),
            })
            .collect()
    }

    #[test]
    fn coded_columns_read_back_as_their_texts_with_the_statistics_arrow_rs_writes() {
        let dir = tempfile::tempdir().unwrap();
        let rows: Vec<u32> = (0..45_000).collect();
        fn columns(c: Columns<'_, u32>) -> Columns<'_, u32> {
            c.int("n", false, |&i| Some(i64::from(i)))
                .coded("a", false, name, |&i| codes(i).0)
                .coded("b", true, name, |&i| codes(i).1)
                .coded("c", true, name, |&i| codes(i).2)
        }
        let coded =
            Columns::write_chunked(&dir.path().join("coded"), &rows, 4_096, columns).unwrap();
        let plain = columns(Columns::new(&rows))
            .write_in(&dir.path().join("plain"))
            .unwrap();
        let batches = crate::parquet::read_file(&coded).unwrap();
        let mut seen = 0;
        for b in &batches {
            let n = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            for (col, pick) in [(1, 0), (2, 1), (3, 2)] {
                let texts = b
                    .column(col)
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .unwrap();
                for r in 0..b.num_rows() {
                    let i = n.value(r) as u32;
                    let code = [codes(i).0, codes(i).1, codes(i).2][pick];
                    let want = if code == NONE { None } else { name(code) };
                    let got = (!texts.is_null(r)).then(|| texts.value(r));
                    assert_eq!(got, want, "row {i} column {col}");
                }
            }
            seen += b.num_rows();
        }
        assert_eq!(seen, 45_000);
        assert_eq!(chunk_stats(&coded), chunk_stats(&plain));
        assert_eq!(
            chunk_stats(&coded)[1..],
            [
                "Some(\"same\") Some(\"t299\") Some(0)",
                "Some(\"t004\") Some(\"t004\") Some(24941)",
                "None None Some(45000)",
            ]
        );
    }

    #[test]
    fn each_pages_least_and_greatest_text_and_its_rows_without_one_are_in_the_page_index() {
        use parquet::file::page_index::column_index::ColumnIndexMetaData;
        use parquet::file::serialized_reader::ReadOptionsBuilder;
        let dir = tempfile::tempdir().unwrap();
        let rows: Vec<u32> = (0..45_000).collect();
        let file = Columns::write_chunked(&dir.path().join("t"), &rows, 4_096, |c| {
            c.coded("a", false, name, |&i| codes(i).0)
                .coded("b", true, name, |&i| codes(i).1)
        })
        .unwrap();
        let options = ReadOptionsBuilder::new().with_page_index().build();
        let r =
            SerializedFileReader::new_with_options(std::fs::File::open(&file).unwrap(), options)
                .unwrap();
        let index = r.metadata().page_index_for_row_group(0);
        let mut seen = Vec::new();
        for c in 0..2 {
            let Some(ColumnIndexMetaData::BYTE_ARRAY(pages)) = index.column_index(c) else {
                panic!("column {c}: {:?}", index.column_index(c));
            };
            let starts: Vec<i64> = index
                .page_locations(c)
                .unwrap()
                .iter()
                .map(|p| p.first_row_index)
                .collect();
            assert_eq!(starts, [0, 20_000, 40_000]);
            for (p, &start) in starts.iter().enumerate() {
                let texts: Vec<&str> = (start as u32..(start as u32 + 20_000).min(45_000))
                    .filter_map(|i| name([codes(i).0, codes(i).1][c]))
                    .collect();
                let nulls =
                    (start as u32..(start as u32 + 20_000).min(45_000)).count() - texts.len();
                let text = |v: Option<&[u8]>| v.map(|b| String::from_utf8(b.to_vec()).unwrap());
                assert_eq!(
                    (
                        text(pages.min_value(p)),
                        text(pages.max_value(p)),
                        pages.null_count(p)
                    ),
                    (
                        texts.iter().min().map(|t| t.to_string()),
                        texts.iter().max().map(|t| t.to_string()),
                        Some(nulls as i64)
                    ),
                    "column {c} page {p}"
                );
                seen.push(nulls);
            }
        }
        assert_eq!(seen, [0, 0, 0, 11137, 11070, 2734]);
    }

    #[test]
    fn a_code_without_a_text_or_a_required_row_without_one_is_one_line_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let rows: Vec<u32> = (0..10).collect();
        // Each case: its folder, the rows' codes, the line it gets.
        type Case = (&'static str, fn(u32) -> u32, &'static str);
        let cases: [Case; 3] = [
            (
                "t",
                |i| if i == 6 { 300 } else { i },
                "no text for the code 300",
            ),
            (
                "r",
                |i| if i >= 6 { NONE } else { i },
                "4 rows without a value in the required column a",
            ),
            (
                "s",
                |_| NONE,
                "10 rows without a value in the required column a",
            ),
        ];
        for (folder, code, why) in cases {
            let e = Columns::write_chunked(&dir.path().join(folder), &rows, 4, |c| {
                c.coded("a", false, name, move |&i| code(i))
            })
            .unwrap_err();
            let file = dir.path().join(folder).join("part-00000.parquet");
            let want = format!("cannot encode {}: Parquet error: {why}", file.display());
            assert_eq!(e.to_string(), want);
            assert_eq!(
                std::fs::read_dir(dir.path().join(folder)).unwrap().count(),
                0
            );
        }
    }
}
