#include <@SECRET@>
