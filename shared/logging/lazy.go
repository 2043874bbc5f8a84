package logging

import (
	"slices"
	"sync"

	"go.uber.org/zap/zapcore"
)

// lazyFields wraps a zap core so that the fields of a logger's WithValues
// are encoded only once the logger writes an entry. controller-runtime
// gives every reconcile a logger with its controller, object and
// reconcile ID, and zap encodes such fields at once, for every reconcile,
// though at the levels a cluster runs with most reconciles write nothing
// (logr's WithValues was 2.5 % of the TrainingJob operator's CPU in a
// profile at 30 jobs a second, issue 25; BenchmarkReconcileLogger: 7.5 to
// 7.8 µs and 6.2 kB per reconcile's logger before, 3.0 to 4.0 µs and 3.2
// kB after). A value is thus encoded when the entry is written, not when
// it was attached; the operators attach names, not objects that change.
func lazyFields(core zapcore.Core) zapcore.Core {
	return &lazyCore{base: core}
}

// lazyCore is base with fields that it encodes, once, when an entry is
// written through it or through one of its children.
type lazyCore struct {
	base   zapcore.Core
	fields []zapcore.Field

	once  sync.Once
	built zapcore.Core
}

func (c *lazyCore) Enabled(level zapcore.Level) bool { return c.base.Enabled(level) }

// With adds fields to the ones still to encode; the children share
// nothing they could change.
func (c *lazyCore) With(fields []zapcore.Field) zapcore.Core {
	if len(fields) == 0 {
		return c
	}
	return &lazyCore{base: c.base, fields: append(slices.Clip(c.fields), fields...)}
}

func (c *lazyCore) Check(entry zapcore.Entry, checked *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.base.Enabled(entry.Level) {
		return checked
	}
	return c.core().Check(entry, checked)
}

func (c *lazyCore) Write(entry zapcore.Entry, fields []zapcore.Field) error {
	return c.core().Write(entry, fields)
}

func (c *lazyCore) Sync() error { return c.base.Sync() }

// core is base with the fields encoded, built on first use.
func (c *lazyCore) core() zapcore.Core {
	c.once.Do(func() {
		c.built = c.base
		if len(c.fields) > 0 {
			c.built = c.base.With(c.fields)
		}
	})
	return c.built
}
