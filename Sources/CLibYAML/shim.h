// Debian's libyaml (libyaml-dev, pkg-config yaml-0.1): its event parser, for the rule files. Only
// Sources/ProxyRules/LibYAML imports this module; the rest of ProxyRules sees YAMLNode.
#ifndef HOOKPROXY_CLIBYAML_SHIM_H
#define HOOKPROXY_CLIBYAML_SHIM_H

#include <yaml.h>

#endif
