// Package upgrade is the upgrade e2e suite (issue 15, suite 5). It runs on a
// cluster where hack/e2e/upgrade-from.sh installed the platform of an
// earlier git revision: it creates objects of every kind, runs the upgrade
// command the script passes in ML_PLATFORM_E2E_UPGRADE_CMD (the working
// tree's quickstart install), and checks that every object keeps working,
// that no running training or notebook pod was restarted, that the CRDs are
// the working tree's and that a job keeps the backend it started on. It
// skips without ML_PLATFORM_E2E=1 and without that command.
package upgrade
