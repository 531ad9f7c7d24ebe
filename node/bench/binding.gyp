# node-gyp's build of the bench's addon, in the folder bench/build.js prepares (its gen/bench.gypi
# names the package's objects and include folders). One product, build/Release/cuv_node_bench.node:
# the objects an install of the package compiled, all but its entry (src/addon.o), linked with the
# bench's entry and its comparison bindings (src/): the same code as the package's addon, plus
# `baseline`. Flags as the package's binding.gyp, so the bench's own files build as its do.
{
  'includes': ['gen/bench.gypi'],
  'targets': [
    {
      'target_name': 'cuv_node_bench',
      'sources': ['src/addon.c', 'src/baseline.c'],
      'cflags_c': ['-std=gnu11', '-fvisibility=hidden', '-Wshadow', '-Wstrict-prototypes',
                   '-Wmissing-prototypes', '-Wno-unused-parameter'],
      'defines': ['_GNU_SOURCE', 'NAPI_VERSION=8'],
      'include_dirs': ['src', '<@(bench_includes)'],
      'libraries': ['<@(bench_objects)', '-ldl', '-lm', '-pthread'],
      'ldflags': ['-Wl,-z,nodelete'],
      'conditions': [['bench_werror==1', {'cflags_c': ['-Werror']}]],
    },
  ],
}
