#import "@SECRET@"
