// SPDX-License-Identifier: GPL-2.0
// Block I/O latency histogram for the MCO collector (libbpf CO-RE).
//
// block_rq_issue stores the issue time keyed by the request pointer;
// block_rq_complete turns it into a latency and counts it in its device's
// histogram: log2 buckets of microseconds, each split into 2^SUB_BITS linear
// sub-buckets. Counters only grow; user space reads them and takes the
// difference between two reads, so nothing is lost to a read-and-reset race.
// One map entry per device (an array of slots), so a read walks a small map:
// the kernel scans every hash bucket on each read, which at one entry per
// (device, slot) cost a quarter of a millisecond a second.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define MAX_INFLIGHT 16384
#define MAX_DEVICES 512
#define MAX_SLOTS 128 /* power of two; the last slot also takes everything beyond 2^32 us (71 min) */
#define SUB_BITS 2 /* 4 linear sub-buckets per power of two */
#define MINORBITS 20

/* Completions per slot (log2 bucket << SUB_BITS | sub-bucket) of one device. */
struct dev_hist {
	__u64 slots[MAX_SLOTS];
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
	__uint(max_entries, MAX_DEVICES);
	__type(key, __u32); /* major << 20 | first_minor, as the kernel's dev_t */
	__type(value, struct dev_hist);
} hist SEC(".maps");

/* A new device's first value: 1 KiB does not fit the 512-byte BPF stack, global data does. */
static const struct dev_hist empty_hist;

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
	__u64 *tsp, delta_us;
	struct dev_hist *hist_of_dev;
	__u32 dev, slot;

	tsp = bpf_map_lookup_elem(&start, &key);
	if (!tsp)
		return 0;
	delta_us = (bpf_ktime_get_ns() - *tsp) / 1000;
	bpf_map_delete_elem(&start, &key);
	dev = request_dev(rq);
	slot = latency_slot(delta_us);
	if (slot >= MAX_SLOTS)
		slot = MAX_SLOTS - 1;
	hist_of_dev = bpf_map_lookup_elem(&hist, &dev);
	if (!hist_of_dev) {
		/* first completion of this device; another CPU may create it meanwhile (then ours fails) */
		bpf_map_update_elem(&hist, &dev, &empty_hist, BPF_NOEXIST);
		hist_of_dev = bpf_map_lookup_elem(&hist, &dev);
		if (!hist_of_dev)
			return 0; /* MAX_DEVICES devices already seen */
	}
	asm volatile("" : "+r"(slot)); /* keep the mask below: the verifier needs to see the bound here */
	__sync_fetch_and_add(&hist_of_dev->slots[slot & (MAX_SLOTS - 1)], 1);
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
