// SPDX-License-Identifier: GPL-2.0
// Block I/O latency histogram for the MCO collector (libbpf CO-RE).
//
// block_rq_issue stores the issue time keyed by the request pointer;
// block_rq_complete turns it into a latency and counts it in a per-device
// histogram: log2 buckets of microseconds, each split into SUB_SLOTS linear
// sub-buckets. Counters only grow; user space reads them and takes the
// difference between two reads, so nothing is lost to a read-and-reset race.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define MAX_INFLIGHT 16384
#define MAX_HIST_ENTRIES 8192
#define SUB_BITS 2 /* 4 linear sub-buckets per power of two */
#define MINORBITS 20

struct hist_key {
	__u32 dev;  /* major << 20 | first_minor, as the kernel's dev_t */
	__u32 slot; /* log2 bucket << SUB_BITS | sub-bucket */
};

/* LRU: a request that never completes (device removed) cannot fill the map. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__type(key, __u64);   /* struct request * */
	__type(value, __u64); /* issue time, ns */
} start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_HIST_ENTRIES);
	__type(key, struct hist_key);
	__type(value, __u64);
} hist SEC(".maps");

/* Older kernels keep the disk in rq->rq_disk, newer ones in rq->q->disk. */
struct request___old {
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

static __always_inline __u32 request_dev(struct request *rq)
{
	struct gendisk *disk;

	if (bpf_core_field_exists(((struct request___old *)0)->rq_disk))
		disk = BPF_CORE_READ((struct request___old *)rq, rq_disk);
	else
		disk = BPF_CORE_READ(rq, q, disk);
	if (!disk)
		return 0;
	return ((__u32)BPF_CORE_READ(disk, major) << MINORBITS) | (__u32)BPF_CORE_READ(disk, first_minor);
}

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0, shift;

	shift = (v > 0xFFFFFFFFULL) << 5; v >>= shift; r |= shift;
	shift = (v > 0xFFFF) << 4; v >>= shift; r |= shift;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

/* Slot of a latency in microseconds: values below 2^SUB_BITS get their own slot. */
static __always_inline __u32 latency_slot(__u64 us)
{
	__u32 lg;

	if (us < (1 << SUB_BITS))
		return (__u32)us;
	lg = log2_u64(us);
	return ((lg - SUB_BITS + 1) << SUB_BITS) | (__u32)((us >> (lg - SUB_BITS)) & ((1 << SUB_BITS) - 1));
}

static __always_inline int trace_issue(struct request *rq)
{
	__u64 key = (__u64)rq;
	__u64 ts = bpf_ktime_get_ns();

	bpf_map_update_elem(&start, &key, &ts, BPF_ANY);
	return 0;
}

static __always_inline int trace_complete(struct request *rq)
{
	__u64 key = (__u64)rq;
	__u64 *tsp, delta_us, one = 1, *count;
	struct hist_key hkey = {};

	tsp = bpf_map_lookup_elem(&start, &key);
	if (!tsp)
		return 0;
	delta_us = (bpf_ktime_get_ns() - *tsp) / 1000;
	bpf_map_delete_elem(&start, &key);
	hkey.dev = request_dev(rq);
	hkey.slot = latency_slot(delta_us);
	count = bpf_map_lookup_elem(&hist, &hkey);
	if (!count && bpf_map_update_elem(&hist, &hkey, &one, BPF_NOEXIST) == 0)
		return 0;
	/* the slot exists, or another CPU created it between our lookup and update: add to it */
	if (!count)
		count = bpf_map_lookup_elem(&hist, &hkey);
	if (count)
		__sync_fetch_and_add(count, 1);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(mco_rq_issue_btf, struct request *rq)
{
	return trace_issue(rq);
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(mco_rq_complete_btf, struct request *rq, int error, unsigned int nr_bytes)
{
	return trace_complete(rq);
}

char LICENSE[] SEC("license") = "GPL";
