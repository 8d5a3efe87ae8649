# mk/python.mk — which CPython cserve embeds, and how (included by the
# Makefile; docs/python.md explains the choices).
#
# In:  PYTHON (the interpreter to embed), PYTHON_PC (a pkg-config name to take
#      its flags from instead), PYTHON_LINK (auto|static|shared), SAN (set for
#      a sanitizer build).
# Out: PY_CFLAGS and PY_LIBS (compile against it and link it); PY_LINK
#      (static or shared libpython: auto links the shared one wherever the
#      installation has it), with PY_LINK_FLAGS and PY_LINK_DEPS for a static
#      link (-no-pie, the archive to relink on); PY_DEFS (the home, the
#      executable, the standard library and the library name cserve starts
#      that interpreter by, whatever PATH holds); PY_HOME, PY_VER, PY_VERT.
# A combination that cannot work (a shared link without a shared libpython,
# a static one without the archive or with a sanitizer) stops make with one
# line saying what to build instead.
#
# Everything is asked of PYTHON itself (sysconfig), so a pyenv, a venv's
# python or python3.12 works as well as the system's /usr/bin/python3.

# PYTHON, asked where its installation lives, which version it is, and
# (for the link) whether it has a shared libpython, where the static archive
# is, if there is one, and (last, as they are several words) the libraries
# the archive needs.
PY_PROBE  := $(shell $(PYTHON) -c 'import os, sys, sysconfig as s; g = s.get_config_var; \
  a = os.path.join(g("LIBPL") or "", g("LIBRARY") or ""); \
  print(sys.base_prefix, "%d.%d" % sys.version_info[:2], g("BINDIR"), g("LIBDIR"), g("Py_ENABLE_SHARED") or 0, \
        a if a.endswith(".a") and os.path.isfile(a) else "-", \
        " ".join(g(k) or "" for k in ("LIBS", "SYSLIBS", "MODLIBS")))' 2>/dev/null)
PY_HOME   := $(word 1,$(PY_PROBE))
PY_VER    := $(word 2,$(PY_PROBE))
PY_BINDIR := $(word 3,$(PY_PROBE))
PY_LIBDIR := $(word 4,$(PY_PROBE))
PY_SHARED := $(word 5,$(PY_PROBE))
PY_ARCHIVE := $(filter-out -,$(word 6,$(PY_PROBE)))
PY_ARCHIVE_LIBS := $(wordlist 7,$(words $(PY_PROBE)),$(PY_PROBE))
# A free-threaded build (PEP 703, "3.13t") names its executable, its
# -config script, its pkg-config file and its library directory with the ABI
# flag "t" (python3.13t, lib/python3.13t): PY_VERT is PY_VER with that flag,
# and the standard library directory is taken as the interpreter says, not
# composed. For a GIL build they are what they always were (python3.11,
# PREFIX/lib/python3.11).
PY_PROBE_FT := $(shell $(PYTHON) -c 'import sysconfig as s; \
  print("t" if s.get_config_var("Py_GIL_DISABLED") else "-", s.get_path("stdlib"))' 2>/dev/null)
PY_ABI_THREAD := $(filter-out -,$(word 1,$(PY_PROBE_FT)))
PY_STDLIB := $(word 2,$(PY_PROBE_FT))
PY_VERT   := $(PY_VER)$(PY_ABI_THREAD)
# The flags: the system python3 keeps its pkg-config file (PYTHON_PC);
# any other interpreter (pyenv, a venv's python, python3.12) gives them
# through its own pythonX.Y-config --embed, or its python-X.Y-embed.pc when
# there is no -config script.
PY_CONFIG := $(wildcard $(PY_BINDIR)/python$(PY_VERT)-config)
ifneq ($(PYTHON_PC),)
  PY_CFLAGS := $(shell pkg-config --cflags $(PYTHON_PC) 2>/dev/null)
  PY_LIBS   := $(shell pkg-config --libs $(PYTHON_PC) 2>/dev/null)
else ifneq ($(PY_CONFIG),)
  PY_CFLAGS := $(shell $(PY_CONFIG) --includes)
  PY_LIBS   := $(shell $(PY_CONFIG) --embed --ldflags)
else
  PY_CFLAGS := $(shell PKG_CONFIG_PATH=$(PY_LIBDIR)/pkgconfig pkg-config --cflags python-$(PY_VERT)-embed 2>/dev/null)
  PY_LIBS   := $(shell PKG_CONFIG_PATH=$(PY_LIBDIR)/pkgconfig pkg-config --libs python-$(PY_VERT)-embed 2>/dev/null)
endif
# Static or shared libpython (docs/python.md). auto links the shared
# libpython wherever the installation has one: the binary then runs the
# libpython3.X.so the system's package manager keeps current, so a python3
# security update reaches cserve at its next restart, with no rebuild. The
# static link stays an option (PYTHON_LINK=static) for speed: a distribution
# may build its interpreter twice, Debian's /usr/bin/python3.11 linked with a
# static libpython compiled with profile-guided optimisation (libpython3.11.a
# holds the same objects, without the LTO of python3's own link) and the
# shared libpython3.11.so without it, so Python code runs slower on the
# shared one. Where the installation has no shared libpython (a pyenv or
# source build without --enable-shared), auto links its archive. Sanitizer
# builds keep the shared library (TSan needs a PIE executable).
ifeq ($(PYTHON_LINK),auto)
  PY_LINK := $(if $(and $(filter 0,$(PY_SHARED)),$(PY_ARCHIVE),$(if $(SAN),,1)),static,shared)
else ifeq ($(PYTHON_LINK),static)
  PY_LINK := static
  $(if $(PY_ARCHIVE),,$(error PYTHON_LINK=static: $(PYTHON) has no static libpython installed (sysconfig LIBPL/LIBRARY)))
  $(if $(SAN),$(error PYTHON_LINK=static with SAN=$(SAN): a sanitizer build links the shared libpython))
else ifeq ($(PYTHON_LINK),shared)
  PY_LINK := shared
else
  $(error PYTHON_LINK must be auto, static or shared, not '$(PYTHON_LINK)')
endif
# -lpythonX.Y of an installation without a shared libpython would find the
# archive, and the binary would not be what --version says.
$(if $(and $(filter shared,$(PY_LINK)),$(filter 0,$(PY_SHARED))),$(error $(PYTHON) has no shared libpython \
  (built without --enable-shared): build with PYTHON_LINK=static, and without SAN))
PY_LINK_FLAGS :=
PY_LINK_DEPS  :=
ifeq ($(PY_LINK),static)
  # The archive's objects are not position-independent (Debian's are not),
  # so the executable is not either, as Debian's python3 is not; and the
  # archive needs the libraries its built-in modules use (zlib, expat). The
  # binary holds the interpreter, so it is relinked when the archive changes.
  PY_LIBS   := $(PY_ARCHIVE) $(PY_ARCHIVE_LIBS)
  PY_LINK_FLAGS := -no-pie
  PY_LINK_DEPS  := $(PY_ARCHIVE)
endif
# A libpython outside the linker's default directories (pyenv, /opt) is found
# at run time through an rpath; an executable holding libpython must export
# its symbols so the C extension modules it loads (_ssl, numpy) can link
# against them.
# (A shared link implies a shared libpython: an installation without one is refused above.)
PY_LIBS   += $(if $(filter shared,$(PY_LINK)),$(if $(filter /usr/lib% /lib%,$(PY_LIBDIR)),,-Wl,-rpath,$(PY_LIBDIR)))
PY_LIBS   += -Wl,--export-dynamic
# cserve starts that installation by its own prefix, whatever PATH holds.
PY_DEFS   := -DCSERVE_PYTHON_HOME='"$(PY_HOME)"' -DCSERVE_PYTHON_EXE='"$(PY_BINDIR)/python$(PY_VERT)"' \
             -DCSERVE_PYTHON_STDLIB='"$(PY_STDLIB)"' -DCSERVE_PYTHON_LIBNAME='"python$(PY_VERT)"'
