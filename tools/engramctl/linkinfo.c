// SPDX-License-Identifier: GPL-2.0
/*
 * Listeners (host role) and links (client role) as the kernel reports them.
 * As for tables, every attribute is optional on the wire and only the ones
 * received are shown.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include <netlink/attr.h>

#include "fmt.h"
#include "jsonout.h"
#include "linkinfo.h"

_Static_assert(ENGRAM_A_MAX < 64, "the present masks need widening");

const char *listen_state_name(uint8_t state)
{
	switch (state) {
	case ENGRAM_LISTEN_ACTIVE:	return "active";
	case ENGRAM_LISTEN_WAITING:	return "waiting";
	default:			return "unknown";
	}
}

const char *link_state_name(uint8_t state)
{
	switch (state) {
	case ENGRAM_LINK_CONNECTING:	return "connecting";
	case ENGRAM_LINK_UP:		return "up";
	case ENGRAM_LINK_DOWN:		return "down";
	default:			return "unknown";
	}
}

const char *allow_mode_name(uint8_t mode)
{
	switch (mode) {
	case ENGRAM_ALLOW_ANY:		return "any";
	case ENGRAM_ALLOW_LIST:		return "list";
	case ENGRAM_ALLOW_NONE:		return "none";
	default:			return "unknown";
	}
}

static const char *transport_name(uint8_t transport)
{
	switch (transport) {
	case ENGRAM_TRANSPORT_RDMA:	return "rdma";
	case ENGRAM_TRANSPORT_TCP:	return "tcp";
	default:			return "unknown";
	}
}

static void get_str(char *dst, size_t len, struct nlattr *nla)
{
	snprintf(dst, len, "%s", nla_get_string(nla));
}

int listen_info_from_attrs(struct listen_info *li, struct nlattr **tb)
{
	memset(li, 0, sizeof(*li));
	if (!tb[ENGRAM_A_URL])
		return -EPROTO;
	li->present |= 1ULL << ENGRAM_A_URL;
	get_str(li->url, sizeof(li->url), tb[ENGRAM_A_URL]);
	if (tb[ENGRAM_A_LISTEN_STATE]) {
		li->present |= 1ULL << ENGRAM_A_LISTEN_STATE;
		li->state = nla_get_u8(tb[ENGRAM_A_LISTEN_STATE]);
	}
	if (tb[ENGRAM_A_DEVICE]) {
		li->present |= 1ULL << ENGRAM_A_DEVICE;
		get_str(li->device, sizeof(li->device), tb[ENGRAM_A_DEVICE]);
	}
	if (tb[ENGRAM_A_CONNECTIONS]) {
		li->present |= 1ULL << ENGRAM_A_CONNECTIONS;
		li->connections = nla_get_u32(tb[ENGRAM_A_CONNECTIONS]);
	}
	if (tb[ENGRAM_A_LINK_ERROR]) {
		li->present |= 1ULL << ENGRAM_A_LINK_ERROR;
		li->error = nla_get_u32(tb[ENGRAM_A_LINK_ERROR]);
	}
	if (tb[ENGRAM_A_ALLOW_MODE]) {
		li->present |= 1ULL << ENGRAM_A_ALLOW_MODE;
		li->allow_mode = nla_get_u8(tb[ENGRAM_A_ALLOW_MODE]);
	}
	return 0;
}

/* Queues a newer kernel may have beyond ours are left out, as latency buckets are. */
static void queue_fetches_from_nest(struct link_info *li, struct nlattr *nest)
{
	struct nlattr *nla;
	int rem;

	nla_for_each_nested(nla, nest, rem) {
		int q = nla_type(nla);

		if (q < 1 || q > (int)(sizeof(li->queue_fetches) / sizeof(li->queue_fetches[0])) ||
		    nla_len(nla) != sizeof(uint64_t))
			continue;
		li->queue_fetches[q - 1] = nla_get_u64(nla);
		if ((uint32_t)q > li->nr_queue_fetches)
			li->nr_queue_fetches = q;
	}
}

int link_info_from_attrs(struct link_info *li, struct nlattr **tb)
{
	int a;

	memset(li, 0, sizeof(*li));
	if (!tb[ENGRAM_A_LINK_ID])
		return -EPROTO;
	for (a = 1; a <= ENGRAM_A_MAX; a++) {
		struct nlattr *nla = tb[a];

		if (!nla)
			continue;
		li->present |= 1ULL << a;
		switch (a) {
		case ENGRAM_A_LINK_ID:
			li->id = nla_get_u32(nla);
			break;
		case ENGRAM_A_URL:
			get_str(li->url, sizeof(li->url), nla);
			break;
		case ENGRAM_A_LINK_STATE:
			li->state = nla_get_u8(nla);
			break;
		case ENGRAM_A_LINK_ERROR:
			li->error = nla_get_u32(nla);
			break;
		case ENGRAM_A_DEVICE:
			get_str(li->device, sizeof(li->device), nla);
			break;
		case ENGRAM_A_LINK_TABLES:
			li->tables = nla_get_u32(nla);
			break;
		case ENGRAM_A_LINK_MAX_ROWS:
			li->max_rows = nla_get_u32(nla);
			break;
		case ENGRAM_A_LINK_MAX_INFLIGHT:
			li->max_inflight = nla_get_u32(nla);
			break;
		case ENGRAM_A_LINK_PROTOCOL:
			li->protocol = nla_get_u32(nla);
			break;
		case ENGRAM_A_LINK_QUEUES:
			li->queues = nla_get_u32(nla);
			break;
		case ENGRAM_A_LINK_QUEUE_FETCHES:
			queue_fetches_from_nest(li, nla);
			break;
		case ENGRAM_A_LINK_CONNECTS:
			li->connects = nla_get_u64(nla);
			break;
		case ENGRAM_A_LINK_SINCE_NS:
			li->since_ns = nla_get_u64(nla);
			break;
		case ENGRAM_A_TRANSPORT:
			li->transport = nla_get_u8(nla);
			break;
		case ENGRAM_A_LINK_RECONNECTS:
			li->reconnects = nla_get_u64(nla);
			break;
		case ENGRAM_A_LINK_HEARTBEAT_US:
			li->heartbeat_us = nla_get_u32(nla);
			break;
		case ENGRAM_A_STATS:
			stats_info_from_nest(&li->si, nla);
			break;
		case ENGRAM_A_LATENCY:
			lat_info_from_nest(&li->lat, nla);
			break;
		case ENGRAM_A_LATENCY_SUM_NS:
			lat_info_sum_from_attr(&li->lat, nla);
			break;
		default:
			li->present &= ~(1ULL << a);
			break;
		}
	}
	return 0;
}

static int json_error(json_t *o, uint32_t error)
{
	return json_set(o, "error", json_integer(error)) ||
	       json_set(o, "error_str", json_string(strerror((int)error)));
}

json_t *listen_info_json(const struct listen_info *li)
{
	json_t *o = json_object();
	int ret;

	if (!o)
		return NULL;
	ret = json_set(o, "url", json_string(li->url));
	if (LI_HAS(li, ENGRAM_A_LISTEN_STATE))
		ret |= json_set(o, "state", json_string(listen_state_name(li->state)));
	if (LI_HAS(li, ENGRAM_A_DEVICE))
		ret |= json_set(o, "device", json_string(li->device));
	if (LI_HAS(li, ENGRAM_A_CONNECTIONS))
		ret |= json_set(o, "connections", json_integer(li->connections));
	if (LI_HAS(li, ENGRAM_A_LINK_ERROR))
		ret |= json_error(o, li->error);
	if (LI_HAS(li, ENGRAM_A_ALLOW_MODE))
		ret |= json_set(o, "allow", json_string(allow_mode_name(li->allow_mode)));
	if (ret) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *link_info_json(const struct link_info *li, int counters)
{
	json_t *o = json_object();
	int ret;

	if (!o)
		return NULL;
	ret = json_set(o, "id", json_integer(li->id));
	if (LI_HAS(li, ENGRAM_A_URL))
		ret |= json_set(o, "url", json_string(li->url));
	if (LI_HAS(li, ENGRAM_A_LINK_STATE))
		ret |= json_set(o, "state", json_string(link_state_name(li->state)));
	if (LI_HAS(li, ENGRAM_A_LINK_ERROR))
		ret |= json_error(o, li->error);
	if (LI_HAS(li, ENGRAM_A_DEVICE))
		ret |= json_set(o, "device", json_string(li->device));
	if (LI_HAS(li, ENGRAM_A_LINK_TABLES))
		ret |= json_set(o, "tables", json_integer(li->tables));
	if (LI_HAS(li, ENGRAM_A_LINK_MAX_ROWS))
		ret |= json_set(o, "max_rows", json_integer(li->max_rows));
	if (LI_HAS(li, ENGRAM_A_LINK_MAX_INFLIGHT))
		ret |= json_set(o, "max_inflight", json_integer(li->max_inflight));
	if (LI_HAS(li, ENGRAM_A_LINK_CONNECTS))
		ret |= json_set(o, "connects", json_u64(li->connects));
	if (LI_HAS(li, ENGRAM_A_LINK_SINCE_NS))
		ret |= json_set(o, "since_ns", json_u64(li->since_ns));
	if (LI_HAS(li, ENGRAM_A_TRANSPORT))
		ret |= json_set(o, "transport", json_string(transport_name(li->transport)));
	if (LI_HAS(li, ENGRAM_A_LINK_RECONNECTS))
		ret |= json_set(o, "reconnects", json_u64(li->reconnects));
	if (LI_HAS(li, ENGRAM_A_LINK_HEARTBEAT_US))
		ret |= json_set(o, "heartbeat_us", json_integer(li->heartbeat_us));
	if (LI_HAS(li, ENGRAM_A_LINK_PROTOCOL))
		ret |= json_set(o, "protocol", json_integer(li->protocol));
	if (LI_HAS(li, ENGRAM_A_LINK_QUEUES))
		ret |= json_set(o, "queues", json_integer(li->queues));
	if (li->nr_queue_fetches) {
		json_t *a = json_array();
		uint32_t i;

		for (i = 0; a && i < li->nr_queue_fetches; i++)
			ret |= json_array_append_new(a, json_u64(li->queue_fetches[i]));
		ret |= json_set(o, "queue_fetches", a);
	}
	if (counters) {
		ret |= stats_info_json(&li->si, o);
		if (li->lat.present)
			ret |= json_set(o, "latency", lat_info_json(&li->lat));
	}
	if (ret) {
		json_decref(o);
		return NULL;
	}
	return o;
}

void listen_info_print_line(FILE *f, const struct listen_info *li)
{
	fprintf(f, "%s:", li->url);
	if (LI_HAS(li, ENGRAM_A_LISTEN_STATE))
		fprintf(f, " state %s", listen_state_name(li->state));
	if (LI_HAS(li, ENGRAM_A_DEVICE))
		fprintf(f, " device %s", li->device);
	if (LI_HAS(li, ENGRAM_A_CONNECTIONS))
		fprintf(f, " connections %u", li->connections);
	if (LI_HAS(li, ENGRAM_A_LINK_ERROR))
		fprintf(f, " error \"%s\"", strerror((int)li->error));
	if (LI_HAS(li, ENGRAM_A_ALLOW_MODE))
		fprintf(f, " allow %s", allow_mode_name(li->allow_mode));
	fputc('\n', f);
}

/* Limits are 0 until a connection has negotiated them. */
static int limits_known(const struct link_info *li)
{
	return LI_HAS(li, ENGRAM_A_LINK_MAX_ROWS) && li->max_rows;
}

void link_info_print_line(FILE *f, const struct link_info *li)
{
	char dur[32];

	fprintf(f, "link %u:", li->id);
	if (LI_HAS(li, ENGRAM_A_LINK_STATE)) {
		fprintf(f, " state %s", link_state_name(li->state));
		if (LI_HAS(li, ENGRAM_A_LINK_SINCE_NS))
			fprintf(f, " for %s", fmt_duration(dur, sizeof(dur), li->since_ns));
	}
	if (LI_HAS(li, ENGRAM_A_URL))
		fprintf(f, " url %s", li->url);
	if (LI_HAS(li, ENGRAM_A_TRANSPORT))
		fprintf(f, " transport %s", transport_name(li->transport));
	if (LI_HAS(li, ENGRAM_A_DEVICE))
		fprintf(f, " device %s", li->device);
	if (LI_HAS(li, ENGRAM_A_LINK_TABLES))
		fprintf(f, " tables %u", li->tables);
	if (limits_known(li))
		fprintf(f, " max_rows %u max_inflight %u", li->max_rows, li->max_inflight);
	if (LI_HAS(li, ENGRAM_A_LINK_PROTOCOL))
		fprintf(f, " protocol %u", li->protocol);
	if (LI_HAS(li, ENGRAM_A_LINK_QUEUES))
		fprintf(f, " queues %u", li->queues);
	if (LI_HAS(li, ENGRAM_A_LINK_CONNECTS))
		fprintf(f, " connects %" PRIu64, li->connects);
	if (LI_HAS(li, ENGRAM_A_LINK_RECONNECTS))
		fprintf(f, " reconnects %" PRIu64, li->reconnects);
	if (LI_HAS(li, ENGRAM_A_LINK_HEARTBEAT_US))
		fprintf(f, " heartbeat %uus", li->heartbeat_us);
	if (LI_HAS(li, ENGRAM_A_LINK_ERROR))
		fprintf(f, " error \"%s\"", strerror((int)li->error));
	fputc('\n', f);
}

void link_info_print_detail(FILE *f, const struct link_info *li)
{
	char dur[32];

	fprintf(f, "link %u\n", li->id);
	if (LI_HAS(li, ENGRAM_A_LINK_STATE)) {
		fprintf(f, "  %-15s %s", "state", link_state_name(li->state));
		if (LI_HAS(li, ENGRAM_A_LINK_SINCE_NS))
			fprintf(f, " for %s", fmt_duration(dur, sizeof(dur), li->since_ns));
		fputc('\n', f);
	}
	if (LI_HAS(li, ENGRAM_A_URL))
		fprintf(f, "  %-15s %s\n", "url", li->url);
	if (LI_HAS(li, ENGRAM_A_TRANSPORT))
		fprintf(f, "  %-15s %s\n", "transport", transport_name(li->transport));
	if (LI_HAS(li, ENGRAM_A_DEVICE))
		fprintf(f, "  %-15s %s\n", "device", li->device);
	if (LI_HAS(li, ENGRAM_A_LINK_ERROR))
		fprintf(f, "  %-15s %s (%u)\n", "last error", strerror((int)li->error), li->error);
	if (LI_HAS(li, ENGRAM_A_LINK_TABLES))
		fprintf(f, "  %-15s %u\n", "tables", li->tables);
	if (limits_known(li)) {
		fprintf(f, "  %-15s %u\n", "max rows", li->max_rows);
		fprintf(f, "  %-15s %u\n", "max inflight", li->max_inflight);
		if (LI_HAS(li, ENGRAM_A_LINK_PROTOCOL))
			fprintf(f, "  %-15s %u\n", "protocol", li->protocol);
		if (LI_HAS(li, ENGRAM_A_LINK_QUEUES))
			fprintf(f, "  %-15s %u\n", "queues", li->queues);
	} else if (LI_HAS(li, ENGRAM_A_LINK_MAX_ROWS)) {
		fprintf(f, "  %-15s %s\n", "limits", "not negotiated yet");
	}
	if (LI_HAS(li, ENGRAM_A_LINK_CONNECTS))
		fprintf(f, "  %-15s %" PRIu64 "\n", "connects", li->connects);
	if (LI_HAS(li, ENGRAM_A_LINK_RECONNECTS))
		fprintf(f, "  %-15s %" PRIu64 "\n", "reconnects", li->reconnects);
	if (LI_HAS(li, ENGRAM_A_LINK_HEARTBEAT_US))
		fprintf(f, "  %-15s %u us\n", "heartbeat rtt", li->heartbeat_us);
	if (li->nr_queue_fetches) {
		uint32_t i;

		fprintf(f, "  %-15s", "queue fetches");
		for (i = 0; i < li->nr_queue_fetches; i++)
			fprintf(f, " %" PRIu64, li->queue_fetches[i]);
		fputc('\n', f);
	}
}
