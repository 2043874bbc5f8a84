// Package logging builds the operators' logger: controller-runtime's zap logger with its verbosity capped below the levels at which client-go dumps request and response bodies, so that no credential reaches a log whatever level is asked for.
package logging
