package logging

import (
	"slices"

	"github.com/go-logr/logr"
	uzap "go.uber.org/zap"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// MaxLevel is the highest verbosity any ml-platform logger enables.
// client-go logs through the logger it finds in a request's context (in a
// reconcile, the controller's logger) and dumps whole request and response
// bodies, Secrets included, from V(8) on; its other debugging output starts
// at V(6). controller-runtime's most detailed messages ("Reconciling",
// "Reconcile successful") are at V(5), so 5 keeps everything useful and
// nothing that carries an object's body. The charts' logLevel schema allows
// at most this level; the cap holds even when the flag asks for more.
const MaxLevel = 5

// New returns a zap logger built from opts whose V-levels above MaxLevel are
// never enabled, and whose fields are encoded only when it writes
// (lazyFields).
func New(opts ...zap.Opts) logr.Logger {
	opts = append(slices.Clip(opts), zap.RawZapOpts(uzap.WrapCore(lazyFields)))
	return Cap(zap.New(opts...))
}

// Cap returns logger with every V-level above MaxLevel switched off.
func Cap(logger logr.Logger) logr.Logger {
	sink := logger.GetSink()
	if sink == nil {
		return logger
	}
	// The cap is one more frame between the caller and zap, which reports
	// the caller's file and line: skip it.
	if withDepth, ok := sink.(logr.CallDepthLogSink); ok {
		sink = withDepth.WithCallDepth(1)
	}
	return logger.WithSink(capSink(sink))
}

// SetGlobal makes logger the logger of controller-runtime and of klog, whose
// global logger client-go uses when a request's context carries none (leader
// election, reflectors, warnings from the API server).
func SetGlobal(logger logr.Logger) {
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
}

func capSink(sink logr.LogSink) logr.LogSink {
	if _, ok := sink.(logr.CallDepthLogSink); ok {
		return &cappedDepthSink{cappedSink{sink}}
	}
	return &cappedSink{sink}
}

// cappedSink refuses levels above MaxLevel and forwards everything else.
// logr adds the V-levels of nested V() calls before asking Enabled, so the
// cap also holds for logger.V(3).V(4).
type cappedSink struct {
	logr.LogSink
}

func (s *cappedSink) Enabled(level int) bool {
	return level <= MaxLevel && s.LogSink.Enabled(level)
}

func (s *cappedSink) Info(level int, msg string, keysAndValues ...any) {
	if level > MaxLevel {
		return
	}
	s.LogSink.Info(level, msg, keysAndValues...)
}

func (s *cappedSink) WithValues(keysAndValues ...any) logr.LogSink {
	return capSink(s.LogSink.WithValues(keysAndValues...))
}

func (s *cappedSink) WithName(name string) logr.LogSink {
	return capSink(s.LogSink.WithName(name))
}

// cappedDepthSink keeps the caller information right: zap reports the
// file and line of the code that logged, which depends on call depth.
type cappedDepthSink struct {
	cappedSink
}

func (s *cappedDepthSink) WithCallDepth(depth int) logr.LogSink {
	return capSink(s.LogSink.(logr.CallDepthLogSink).WithCallDepth(depth))
}
