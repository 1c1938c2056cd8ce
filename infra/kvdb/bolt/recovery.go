package bolt

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.etcd.io/bbolt"

	"github.com/contiv-ipam/agent/infra/config"
)

// RecoverFlag (env BOLT_RECOVER) is the operator's answer to a damaged
// database file: the agent moves the file aside and starts on a fresh
// one. It is a flag, not a bolt.conf key: it is a one-off action.
const RecoverFlag = "bolt-recover"

// damagedSuffix is put between the file name and the UTC time of the
// move: bolt.db.damaged-20250102T150405Z.
const damagedSuffix = ".damaged-"

// recovery says whether -bolt-recover is set, with the clock that names
// the moved file.
type recovery struct {
	enabled bool
	now     func() time.Time
}

// RegisterFlags adds -bolt-recover to the agent's command line, plus the
// config-file flag (-bolt-config).
func (p *Plugin) RegisterFlags(fs *flag.FlagSet) {
	p.PluginDeps.RegisterFlags(fs)
	if fs.Lookup(RecoverFlag) == nil {
		fs.Bool(RecoverFlag, false, fmt.Sprintf(
			"if the bolt database file is damaged, move it aside to <db-path>%s<UTC time> and start on a fresh one; "+
				"the agent then rebuilds the pod allocations from the Kubernetes state (env %s)",
			damagedSuffix, config.EnvName(RecoverFlag)))
	}
	p.flags = fs
}

// recovery reads -bolt-recover (else env BOLT_RECOVER).
func (p *Plugin) recovery() (recovery, error) {
	rec := recovery{now: p.now}
	v, set := config.Lookup(p.flags, RecoverFlag, "", p.env)
	if !set {
		return rec, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return rec, fmt.Errorf("bolt: flag -%s / env %s: %q is not a boolean (true or false)",
			RecoverFlag, config.EnvName(RecoverFlag), v)
	}
	rec.enabled = b
	return rec, nil
}

// recoverDB moves the damaged file aside (damage is openDB's error) and
// opens a fresh database in its place.
func recoverDB(cfg Config, log *slog.Logger, rec recovery, damage error) (*bbolt.DB, int64, error) {
	moved, err := moveAside(cfg.DBPath, rec.now())
	if moved == "" {
		return nil, 0, errors.Join(damage, fmt.Errorf("bolt: -%s: %w", RecoverFlag, err))
	}
	if err != nil {
		log.Warn("the move of the damaged database may not survive a crash", "moved-to", moved, "err", err)
	}
	reason := damage
	var de *damageError
	if errors.As(damage, &de) {
		reason = de.reason
	}
	log.Warn("damaged database moved aside by -"+RecoverFlag+"; starting on a fresh one: the pod allocations are "+
		"rebuilt from the Kubernetes state", "path", cfg.DBPath, "moved-to", moved, "damage", reason.Error())
	return openDB(cfg, log)
}

// moveAside renames the file at path to path.damaged-<now in UTC>, with
// -2, -3... appended when that name is taken (a name is never reused, so
// nothing is overwritten), and syncs the directory. It returns the new
// name once the file is renamed, with an error if the sync failed.
func moveAside(path string, now time.Time) (string, error) {
	base := path + damagedSuffix + now.UTC().Format("20060102T150405Z")
	dst := base
	for n := 2; ; n++ {
		_, err := os.Lstat(dst)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("move %q aside: %w", path, err)
		}
		if n > 1000 {
			return "", fmt.Errorf("move %q aside: %s and 999 numbered names are taken", path, base)
		}
		dst = base + "-" + strconv.Itoa(n)
	}
	if err := os.Rename(path, dst); err != nil {
		return "", fmt.Errorf("move %q aside: %w", path, err)
	}
	return dst, syncDir(filepath.Dir(path))
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %q: %w", dir, err)
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}
