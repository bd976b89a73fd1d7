/* SPDX-License-Identifier: GPL-2.0 */
/* Listeners and links as the kernel reports them, and their text and JSON forms. */
#ifndef ENGRAMCTL_LINKINFO_H
#define ENGRAMCTL_LINKINFO_H

#include <stdint.h>
#include <stdio.h>
#include <jansson.h>
#include <linux/engram_rdma.h>

#include "statsinfo.h"

struct nlattr;

/* Bit (1 << ENGRAM_A_*) for every attribute received, as for tables. */
#define LI_HAS(x, attr)	(!!((x)->present & (1ULL << (attr))))

struct listen_info {
	uint64_t present;
	char url[128];
	uint8_t state;
	char device[64];
	uint32_t connections;
	uint32_t error;
	uint8_t allow_mode;
};

struct link_info {
	uint64_t present;
	uint32_t id;
	char url[128];
	uint8_t state;
	uint32_t error;
	char device[64];
	uint32_t tables;
	uint32_t max_rows;
	uint32_t max_inflight;
	uint64_t connects;
	uint64_t since_ns;
	uint8_t transport;
	uint64_t reconnects;
	uint32_t heartbeat_us;
	uint32_t protocol;
	uint32_t queues;
	/* LINK_QUEUE_FETCHES: queue_fetches[i] for queue i, nr_queue_fetches of them */
	uint32_t nr_queue_fetches;
	uint64_t queue_fetches[16];
	struct stats_info si;
	struct lat_info lat;
};

const char *listen_state_name(uint8_t state);
const char *link_state_name(uint8_t state);

/* From attributes parsed by enl_parse(); -EPROTO without URL (listener) or LINK_ID (link). */
/* "any", "list", "none": enum engram_allow_mode. */
const char *allow_mode_name(uint8_t mode);
int listen_info_from_attrs(struct listen_info *li, struct nlattr **tb);
int link_info_from_attrs(struct link_info *li, struct nlattr **tb);

/*
 * {"url", "state", "device", "connections", "error", "error_str", "allow"}:
 * present ones only; "allow" is "any" (no allow-list), "list" or "none".
 */
json_t *listen_info_json(const struct listen_info *li);
/*
 * {"id", "url", "state", "error", "error_str", "device", "tables", "max_rows",
 * "max_inflight", "connects", "since_ns", "transport", "reconnects",
 * "heartbeat_us", "protocol"}; with @counters also every counter
 * and "latency" (see lat_info_json()).
 */
json_t *link_info_json(const struct link_info *li, int counters);

/* "URL: state active device mlx5_0 connections 2 allow list" */
void listen_info_print_line(FILE *f, const struct listen_info *li);
/* "link 1: state up for 3:05 url ... device mlx5_0 tables 2 ..." */
void link_info_print_line(FILE *f, const struct link_info *li);
/* Every attribute, one per line, for "link show ID". */
void link_info_print_detail(FILE *f, const struct link_info *li);

#endif /* ENGRAMCTL_LINKINFO_H */
