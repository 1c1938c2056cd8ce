package manifests

import (
	"debug/elf"
	"errors"
	"fmt"
	"os/exec"
	"testing"

	. "github.com/onsi/gomega"
)

// staticELF fails for a dynamically linked ELF file: one with an
// interpreter (PT_INTERP) or needing shared libraries (DT_NEEDED).
func staticELF(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	var errs []error
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			errs = append(errs, fmt.Errorf("%s has an ELF interpreter (PT_INTERP)", path))
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return err
	}
	if len(libs) > 0 {
		errs = append(errs, fmt.Errorf("%s needs shared libraries %v (DT_NEEDED)", path, libs))
	}
	return errors.Join(errs...)
}

// `make static` builds binaries that run in any image (the images are FROM
// scratch: no libc, no loader); the check itself refuses the system's
// dynamic /bin/sh.
func TestStaticBinaries(t *testing.T) {
	g := NewWithT(t)
	for _, name := range staticBinaries {
		g.Expect(staticELF(binary(t, name))).To(Succeed(), name)
	}
	err := staticELF("/bin/sh")
	g.Expect(err).To(MatchError(ContainSubstring("PT_INTERP")), "/bin/sh")
	g.Expect(err).To(MatchError(ContainSubstring("DT_NEEDED")), "/bin/sh")
}

// The Makefile's ldflags reach the static binaries: -version prints a
// commit, not the "unknown" of an unstamped build.
func TestStaticBinariesAreStamped(t *testing.T) {
	g := NewWithT(t)
	for _, name := range []string{"contiv-agent", "contiv-ksr", "contiv-capi-ipam"} {
		out, err := exec.Command(binary(t, name), "-version").CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		g.Expect(string(out)).To(HavePrefix(name+" "), "%s -version", name)
		g.Expect(string(out)).To(ContainSubstring("(commit "), "%s -version", name)
		g.Expect(string(out)).NotTo(ContainSubstring("commit unknown"), "%s -version", name)
	}
}
