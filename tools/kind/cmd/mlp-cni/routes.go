package main

import (
	"fmt"
	"log"
	"net"

	"github.com/vishvananda/netlink"
)

// routeTable converges the node's routes to other nodes' pod CIDRs.
type routeTable interface {
	converge(want []route) error
	blockUntranslatedServices(serviceCIDRs []string) error
	defaultMTU() int
}

// routeProtocol marks the routes this agent owns, so that routes to nodes
// that went away are removed even across restarts, and nothing else is.
const routeProtocol = netlink.RouteProtocol(77)

type netlinkRoutes struct{}

func (netlinkRoutes) converge(want []route) error {
	wanted := map[string]bool{}
	for _, r := range want {
		_, dst, err := net.ParseCIDR(r.dst)
		if err != nil {
			return err
		}
		wanted[dst.String()] = true
		if err := netlink.RouteReplace(&netlink.Route{Dst: dst, Gw: net.ParseIP(r.gw), Protocol: routeProtocol}); err != nil {
			return fmt.Errorf("route %s via %s: %w", r.dst, r.gw, err)
		}
	}
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		have, err := netlink.RouteListFiltered(family, &netlink.Route{Protocol: routeProtocol}, netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			return err
		}
		for i := range have {
			r := have[i]
			if r.Dst != nil && !wanted[r.Dst.String()] {
				log.Printf("removing route %s via %s", r.Dst, r.Gw)
				if err := netlink.RouteDel(&r); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// defaultMTU is the MTU of the interface holding the default route, which
// pod interfaces must not exceed.
func (netlinkRoutes) defaultMTU() int {
	routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return 0
	}
	for _, r := range routes {
		isDefault := r.Dst == nil || (r.Dst.IP.IsUnspecified() && isZeroMask(r.Dst.Mask))
		if !isDefault {
			continue
		}
		link, err := netlink.LinkByIndex(r.LinkIndex)
		if err == nil {
			return link.Attrs().MTU
		}
	}
	return 0
}

func isZeroMask(m net.IPMask) bool {
	ones, _ := m.Size()
	return ones == 0
}
