package pebble

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// dbCollector exports the Pebble figures an operator tunes by: the block
// cache's hit rate, the memtables and level 0 a write stall comes from,
// compactions, and the WAL's volume. It reads db.Metrics at scrape time,
// so requests pay nothing for it.
type dbCollector struct {
	db *pebble.DB
	b  *backend
}

var (
	descCacheHits      = prometheus.NewDesc("partmap_pebble_block_cache_hits_total", "Block cache hits.", nil, nil)
	descCacheMisses    = prometheus.NewDesc("partmap_pebble_block_cache_misses_total", "Block cache misses: blocks read from disk.", nil, nil)
	descCacheBytes     = prometheus.NewDesc("partmap_pebble_block_cache_bytes", "Bytes in the block cache.", nil, nil)
	descRecordHits     = prometheus.NewDesc("partmap_pebble_record_cache_hits_total", "Lookups of one profile answered from the record cache.", nil, nil)
	descRecordMisses   = prometheus.NewDesc("partmap_pebble_record_cache_misses_total", "Lookups of one profile the record cache sent to Pebble.", nil, nil)
	descRecordEntries  = prometheus.NewDesc("partmap_pebble_record_cache_entries", "Records, and absences, in the record cache.", nil, nil)
	descPresenceAbsent = prometheus.NewDesc("partmap_pebble_presence_absent_total", "Lookups of records the filter of stored keys answered absent without Pebble, as for a new email's create.", nil, nil)
	descMemtables      = prometheus.NewDesc("partmap_pebble_memtables", "Memtables, the mutable one and those waiting to flush.", nil, nil)
	descMemtableBytes  = prometheus.NewDesc("partmap_pebble_memtable_bytes", "Bytes held by memtables.", nil, nil)
	descL0Files        = prometheus.NewDesc("partmap_pebble_l0_files", "Sstables in level 0; many slow reads, and too many stall writes.", nil, nil)
	descTables         = prometheus.NewDesc("partmap_pebble_tables", "Sstables in every level.", nil, nil)
	descTableBytes     = prometheus.NewDesc("partmap_pebble_table_bytes", "Bytes of sstables in every level.", nil, nil)
	descCompactions    = prometheus.NewDesc("partmap_pebble_compactions_total", "Compactions run.", nil, nil)
	descCompactDebt    = prometheus.NewDesc("partmap_pebble_compaction_debt_bytes", "Estimated bytes compactions still have to rewrite.", nil, nil)
	descFlushes        = prometheus.NewDesc("partmap_pebble_flushes_total", "Memtable flushes.", nil, nil)
	descWALBytes       = prometheus.NewDesc("partmap_pebble_wal_written_bytes_total", "Bytes written to the write-ahead log.", nil, nil)
	descWALSyncs       = prometheus.NewDesc("partmap_pebble_wal_fsyncs_total", "Fsyncs of the write-ahead log; each makes every commit before it durable.", nil, nil)
	descDelayedSyncs   = prometheus.NewDesc("partmap_pebble_wal_fsyncs_delayed_total", "Fsyncs held back by --commit-delay for more commits to share them.", nil, nil)
)

func (c dbCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCacheHits, descCacheMisses, descCacheBytes,
		descRecordHits, descRecordMisses, descRecordEntries, descPresenceAbsent, descMemtables, descMemtableBytes,
		descL0Files, descTables, descTableBytes, descCompactions, descCompactDebt, descFlushes, descWALBytes, descWALSyncs, descDelayedSyncs} {
		ch <- d
	}
}

func (c dbCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.db.Metrics()
	var tables, tableBytes int64
	for _, l := range m.Levels {
		tables += l.TablesCount
		tableBytes += l.TablesSize
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter(descCacheHits, float64(m.BlockCache.Hits))
	counter(descCacheMisses, float64(m.BlockCache.Misses))
	gauge(descCacheBytes, float64(m.BlockCache.Size))
	if rc := c.b.cache; rc != nil {
		counter(descRecordHits, float64(rc.hits()))
		counter(descRecordMisses, float64(rc.misses()))
		gauge(descRecordEntries, float64(rc.values.EntryCount()))
	}
	if p := c.b.present; p != nil {
		counter(descPresenceAbsent, float64(p.absent.Load()))
	}
	gauge(descMemtables, float64(m.MemTable.Count))
	gauge(descMemtableBytes, float64(m.MemTable.Size))
	gauge(descL0Files, float64(m.Levels[0].TablesCount))
	gauge(descTables, float64(tables))
	gauge(descTableBytes, float64(tableBytes))
	counter(descCompactions, float64(m.Compact.Count))
	gauge(descCompactDebt, float64(m.Compact.EstimatedDebt))
	counter(descFlushes, float64(m.Flush.Count))
	counter(descWALBytes, float64(m.WAL.BytesWritten))
	counter(descWALSyncs, float64(walSyncs(m)))
	counter(descDelayedSyncs, float64(c.b.delayed.Load()))
}

// walSyncs counts the WAL's fsyncs: the samples of Pebble's fsync latency
// histogram.
func walSyncs(m *pebble.Metrics) uint64 {
	if m.LogWriter.FsyncLatency == nil {
		return 0
	}
	var out dto.Metric
	if err := m.LogWriter.FsyncLatency.Write(&out); err != nil {
		return 0
	}
	return out.GetHistogram().GetSampleCount()
}
