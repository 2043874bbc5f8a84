package main

import (
	"fmt"
	"log"
	"net"
	"sort"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Pod packets addressed to a Service CIDR that kube-proxy has not translated
// (it starts after the first pods, and a Service may have no rules yet) would
// follow the node's default route out of the cluster, through Docker's NAT,
// to whatever answers for that address outside. Policy routing sends them to
// an unreachable route instead, so they fail at once and never leave the node.
// Translated packets no longer carry the Service address (kube-proxy's DNAT
// runs before routing), and the node's own processes keep the main table.
const (
	serviceTable            = 77
	servicePrioLocal        = 7700 // "iif lo to CIDR lookup main"
	servicePrioUntranslated = 7701 // "to CIDR lookup 77"
)

// serviceRule is one policy routing rule this agent owns.
type serviceRule struct {
	priority int
	dst      string
	iif      string
	table    int
}

// serviceRules lists the rules that keep untranslated Service traffic from
// pods on the node.
func serviceRules(cidrs []string) []serviceRule {
	var out []serviceRule
	for _, c := range cidrs {
		_, n, err := net.ParseCIDR(c)
		if err != nil {
			continue
		}
		out = append(out,
			serviceRule{priority: servicePrioLocal, dst: n.String(), iif: "lo", table: unix.RT_TABLE_MAIN},
			serviceRule{priority: servicePrioUntranslated, dst: n.String(), table: serviceTable})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].dst != out[j].dst {
			return out[i].dst < out[j].dst
		}
		return out[i].priority < out[j].priority
	})
	return out
}

// diffRules returns the rules to add and to delete to go from have to want.
func diffRules(have, want []serviceRule) (add, del []serviceRule) {
	in := func(list []serviceRule, r serviceRule) bool {
		for _, x := range list {
			if x == r {
				return true
			}
		}
		return false
	}
	for _, r := range want {
		if !in(have, r) {
			add = append(add, r)
		}
	}
	for _, r := range have {
		if !in(want, r) {
			del = append(del, r)
		}
	}
	return add, del
}

func (netlinkRoutes) blockUntranslatedServices(cidrs []string) error {
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		dst := &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}
		if family == netlink.FAMILY_V6 {
			dst = &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
		}
		r := &netlink.Route{Table: serviceTable, Type: unix.RTN_UNREACHABLE, Dst: dst, Family: family}
		if err := netlink.RouteReplace(r); err != nil {
			return fmt.Errorf("unreachable route in table %d: %w", serviceTable, err)
		}
	}
	var have []serviceRule
	haveRules := map[serviceRule]netlink.Rule{}
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rules, err := netlink.RuleList(family)
		if err != nil {
			return err
		}
		for _, r := range rules {
			if (r.Priority != servicePrioLocal && r.Priority != servicePrioUntranslated) || r.Dst == nil {
				continue
			}
			k := serviceRule{priority: r.Priority, dst: r.Dst.String(), iif: r.IifName, table: r.Table}
			have = append(have, k)
			haveRules[k] = r
		}
	}
	add, del := diffRules(have, serviceRules(cidrs))
	for _, k := range del {
		r := haveRules[k]
		log.Printf("removing rule %+v", k)
		if err := netlink.RuleDel(&r); err != nil {
			return err
		}
	}
	for _, k := range add {
		_, dst, _ := net.ParseCIDR(k.dst)
		r := netlink.NewRule()
		r.Priority, r.Dst, r.IifName, r.Table = k.priority, dst, k.iif, k.table
		r.Family = netlink.FAMILY_V4
		if dst.IP.To4() == nil {
			r.Family = netlink.FAMILY_V6
		}
		log.Printf("adding rule %+v", k)
		if err := netlink.RuleAdd(r); err != nil {
			return fmt.Errorf("rule %+v: %w", k, err)
		}
	}
	return nil
}
