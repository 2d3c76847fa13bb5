package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/brownout/brownout/internal/statedir"
)

// opFile is what survives a restart: the operators' overrides, freeze
// and shadow, with the overrides' ends in wall time.
type opFile struct {
	V            int          `json:"v"`
	Frozen       bool         `json:"frozen"`
	FreezeReason string       `json:"freeze_reason,omitempty"`
	Shadow       bool         `json:"shadow"`
	Overrides    []opOverride `json:"overrides"`
}

type opOverride struct {
	Feature string    `json:"feature"`
	Level   float64   `json:"level"`
	Until   time.Time `json:"until"`
	Reason  string    `json:"reason"`
	// Who set it; absent in files of earlier releases.
	Who string `json:"who,omitempty"`
}

// opStore is the state file. Its writers hold the API's writeMu.
type opStore struct {
	path string
	lk   *os.File // the state dir's lock, held while the API lives
}

// lock takes the state directory for this process: two daemons writing
// one operator.json would each overwrite the other's overrides. The
// directory must be private to this user (owned by it, not writable by
// every user; created 0700 when missing), and the lock file is opened
// without following a symbolic link: another local user must not be
// able to plant operator.json or hold the lock.
func (s *opStore) lock() error {
	dir := filepath.Dir(s.path)
	if err := statedir.Make(dir); err != nil {
		return fmt.Errorf("api: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("api: state dir %s: the lock file: %w (a symbolic link is refused: remove it)", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("api: state dir %s is in use by another process (one daemon per state dir; a standby needs its own): %w", dir, err)
	}
	s.lk = f
	return nil
}

func (s *opStore) unlock() {
	if s.lk != nil {
		syscall.Flock(int(s.lk.Fd()), syscall.LOCK_UN)
		s.lk.Close()
		s.lk = nil
	}
}

// write replaces the file atomically: a temporary file in the same
// directory, synced, renamed over it, and the directory synced.
func (s *opStore) write(f opFile) error {
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".operator-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// save writes the operators' state (Save, after a reload and at
// shutdown); see saveLocked.
func (a *API) save() bool {
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	return a.saveLocked()
}

// saveLocked writes the operators' state as it is now; the caller holds
// writeMu, so that no other change comes between the snapshot and the
// file. A failure is logged and counted
// (brownout_state_save_errors_total) and reported (false) to the
// writer's answer, never fatal: the change is in force, only not on disk.
func (a *API) saveLocked() bool {
	if a.store == nil {
		return true
	}
	if a.closed {
		return false // the directory's lock is released: not ours to write
	}
	if err := a.store.write(a.snapshot()); err != nil {
		a.saveErrors.Add(1)
		a.log.Error("brownout: saving the operators' state", "path", a.store.path, "err", err)
		return false
	}
	return true
}

// snapshot is the operators' state as the file keeps it.
func (a *API) snapshot() opFile {
	f := opFile{V: Version, Overrides: []opOverride{}}
	a.mu.Lock()
	f.Frozen, f.FreezeReason, f.Shadow = a.mu.frozen, a.mu.freezeReason, a.mu.shadow
	a.mu.Unlock()
	for _, ft := range a.ctl.Status().Features {
		if ft.Pin != nil {
			f.Overrides = append(f.Overrides, opOverride{Feature: ft.Name, Level: round(ft.Pin.Level), Until: ft.Pin.Until, Reason: ft.Pin.Reason, Who: a.pinnedBy(ft.Name, ft.Pin)})
		}
	}
	return f
}

// restore applies the saved operators' state. A file that cannot be read
// as one is moved aside (reported), and the controller starts without it.
func (a *API) restore() error {
	b, err := os.ReadFile(a.store.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("api: state file: %w", err)
	}
	var f opFile
	if err := json.Unmarshal(b, &f); err != nil || f.V != Version {
		why := fmt.Sprintf("version %d, want %d", f.V, Version)
		if err != nil {
			why = err.Error()
		}
		aside := a.store.path + ".corrupt-" + a.now().UTC().Format("20060102T150405")
		if mvErr := os.Rename(a.store.path, aside); mvErr != nil {
			return fmt.Errorf("api: state file %s is corrupt (%s) and cannot be moved aside: %w", a.store.path, why, mvErr)
		}
		a.log.Error("brownout: the operators' state file is corrupt; moved aside, starting without it", "path", a.store.path, "aside", aside, "err", why)
		a.events.add(Event{Time: a.now(), Kind: "state-file", What: "the operators' state file was corrupt: moved aside to " + aside + "; started without its overrides, freeze and shadow", Reason: why})
		return nil
	}
	now := a.now()
	for _, o := range f.Overrides {
		left := o.Until.Sub(now)
		if left <= 0 {
			continue
		}
		if _, err := a.ctl.PinAt(now, o.Feature, o.Level, left, o.Reason); err != nil {
			a.log.Warn("brownout: a saved override was dropped", "feature", o.Feature, "err", err)
		} else if o.Who != "" {
			a.setPinner(o.Feature, o.Who, now.Add(left))
		}
	}
	if f.Frozen {
		a.ctl.FreezeAt(now, f.FreezeReason)
	}
	if f.Shadow {
		a.ctl.SetShadowAt(now, true)
	}
	a.mu.Lock()
	a.mu.frozen, a.mu.freezeReason, a.mu.shadow = f.Frozen, f.FreezeReason, f.Shadow
	a.mu.Unlock()
	return nil
}
