// SPDX-License-Identifier: GPL-2.0
// bcc variant of biolatency.bpf.c (same histogram layout: log2 microsecond
// buckets with 4 linear sub-buckets, per device, cumulative counters). bcc
// compiles it at run time against the kernel headers; used only where the
// CO-RE object cannot load and bcc works.
#include <linux/blk-mq.h>
#include <linux/blkdev.h>

#define SUB_BITS 2
#define MINORBITS 20

struct hist_key {
	u32 dev;
	u32 slot;
};

BPF_HASH(start, u64, u64, 16384);
BPF_HASH(hist, struct hist_key, u64, 8192);

static __always_inline u32 log2_u64(u64 v)
{
	u32 r = 0, shift;

	shift = (v > 0xFFFFFFFFULL) << 5; v >>= shift; r |= shift;
	shift = (v > 0xFFFF) << 4; v >>= shift; r |= shift;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

static __always_inline u32 latency_slot(u64 us)
{
	u32 lg;

	if (us < (1 << SUB_BITS))
		return (u32)us;
	lg = log2_u64(us);
	return ((lg - SUB_BITS + 1) << SUB_BITS) | (u32)((us >> (lg - SUB_BITS)) & ((1 << SUB_BITS) - 1));
}

RAW_TRACEPOINT_PROBE(block_rq_issue)
{
	u64 key = (u64)ctx->args[0];
	u64 ts = bpf_ktime_get_ns();

	start.update(&key, &ts);
	return 0;
}

RAW_TRACEPOINT_PROBE(block_rq_complete)
{
	struct request *rq = (struct request *)ctx->args[0];
	u64 key = (u64)ctx->args[0];
	u64 *tsp, zero = 0, *count;
	struct hist_key hkey = {};
	struct gendisk *disk;

	tsp = start.lookup(&key);
	if (!tsp)
		return 0;
	hkey.slot = latency_slot((bpf_ktime_get_ns() - *tsp) / 1000);
	start.delete(&key);
	disk = rq->q->disk;
	if (disk)
		hkey.dev = ((u32)disk->major << MINORBITS) | (u32)disk->first_minor;
	count = hist.lookup_or_try_init(&hkey, &zero);
	if (count)
		__sync_fetch_and_add(count, 1);
	return 0;
}
